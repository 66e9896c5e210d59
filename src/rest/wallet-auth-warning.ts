import { isLoopback } from "../proxy/loopback.js";

/**
 * The warning `pgtoll start` logs when REST agent endpoints trust the wallet in the request
 * (`PGTOLL_REST_AGENT_AUTH=wallet`, the spec's default) on an address other machines can reach: there,
 * anyone who knows an agent's wallet address can spend its balance through `POST /api/query`.
 * Returns undefined where there is nothing to warn about.
 */
export function walletAuthWarning(host: string, restAgentAuth: "wallet" | "signature"): string | undefined {
  if (restAgentAuth !== "wallet" || host === "localhost" || isLoopback(host)) return undefined;
  return `PGTOLL_REST_AGENT_AUTH=wallet on ${host}: anyone who knows an agent's wallet address can spend its balance through POST /api/query; set PGTOLL_REST_AGENT_AUTH=signature for a public deployment`;
}
