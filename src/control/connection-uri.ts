/** Where clients reach an endpoint: through the pgtoll wire proxy, under the endpoint's own host name. */
export interface ProxyAddress {
  proxyHost: string;
  proxyPort: number;
  /** The proxy offers TLS: URIs then ask for it (`sslmode=require`). */
  proxyTls: boolean;
}

/** `<endpoint_id>.<proxy host>` (Neon's shape): the proxy routes on it by TLS SNI. */
export function endpointHost(endpointId: string, proxyHost: string, pooled = false): string {
  return `${endpointId}${pooled ? "-pooler" : ""}.${proxyHost}`;
}

/**
 * A libpq connection URI for a role and database through an endpoint. It names the endpoint twice: in the host
 * (for TLS SNI) and as `options=endpoint=<id>` (for clients without SNI, and hosts that do not resolve the
 * endpoint's name), both of which the proxy understands.
 */
export function connectionUri(
  address: ProxyAddress,
  target: { endpointId: string; role: string; password: string; database: string; pooled?: boolean },
): string {
  const port = address.proxyPort === 5432 ? "" : `:${address.proxyPort}`;
  const host = endpointHost(target.endpointId, address.proxyHost, target.pooled);
  const credentials = `${encodeURIComponent(target.role)}:${encodeURIComponent(target.password)}`;
  const ssl = address.proxyTls ? "sslmode=require&" : "";
  return `postgresql://${credentials}@${host}${port}/${encodeURIComponent(target.database)}?${ssl}options=endpoint%3D${target.endpointId}`;
}
