import type { Hex } from "viem";
import { agentTokenExpiresAtMs, createAgentToken } from "../proxy/agent-token.js";

/** A token is renewed once less than this is left of its lifetime. */
export const TOKEN_RENEW_MARGIN_MS = 5 * 60_000;

/**
 * Agent tokens signed with the agent's own key, made when first needed and renewed before they expire, so
 * that a long-running MCP server always has a valid one for a reconnection or a REST call.
 * Warning: the tokens are bearer credentials; never log them.
 */
export class AgentTokens {
  #token: string | null = null;

  constructor(
    private readonly key: Hex,
    private readonly providerId: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** A token valid for at least {@link TOKEN_RENEW_MARGIN_MS} more. */
  async current(): Promise<string> {
    const at = this.now();
    if (!this.#token || agentTokenExpiresAtMs(this.#token) - at < TOKEN_RENEW_MARGIN_MS) {
      this.#token = await createAgentToken(this.key, this.providerId, at);
    }
    return this.#token;
  }
}
