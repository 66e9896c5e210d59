/** Where the MCP endpoint reaches this process's own wire proxy; the port is known once the proxy listens. */
export interface McpProxyAddress {
  host: string;
  port: number;
  /** TLS to the proxy: needed when it is reached on a non-loopback address. */
  tls: boolean;
}
