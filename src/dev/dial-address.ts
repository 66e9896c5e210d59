/** The address a client on this machine dials for a server listening on `host`: wildcards become loopback. */
export function dialHost(host: string): string {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  if (bare === "0.0.0.0" || bare === "") return "127.0.0.1";
  if (bare === "::") return "::1";
  return bare;
}

/** `url` with its host made dialable by {@link dialHost}. */
export function dialUrl(url: string): URL {
  const parsed = new URL(url);
  const host = dialHost(parsed.hostname);
  parsed.hostname = host.includes(":") ? `[${host}]` : host;
  return parsed;
}
