import type { Duplex } from "node:stream";
import type { AuthenticatedAgent } from "./agent-session.js";

/**
 * How this process's own surfaces (REST's `/api/query`, the remote MCP endpoint) reach its wire proxy, once the
 * proxy listens: every statement they run goes through the proxy's statement pipeline.
 */
export interface ProxyAccess {
  /**
   * A new connection to the proxy from within the process (no TCP); unset until the proxy listens. With `agent`,
   * the proxy takes that agent as authenticated (`RunningProxy.connectInProcess`).
   * Warning: pass an agent only when the caller proved its wallet; the session acts as that agent.
   */
  connect?: (agent?: AuthenticatedAgent) => Duplex;
  /**
   * Has the agent's idle sessions with the provider give their holds back (`RunningProxy.reclaimIdleHolds`), so
   * that what the agent is shown available is what it can spend; unset until the proxy listens.
   */
  reclaimIdleHolds?: (agentWallet: string, providerId: string) => Promise<void> | undefined;
}
