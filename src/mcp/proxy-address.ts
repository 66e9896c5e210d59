import type { Duplex } from "node:stream";

/** How the MCP endpoint reaches this process's own wire proxy, once the proxy listens. */
export interface McpProxyAddress {
  /** A new connection to the proxy from within the process (no TCP); unset until the proxy listens. */
  connect?: () => Duplex;
}
