import type { Config } from "../config.js";
import { embeddedClusterUrl } from "../db/embedded.js";
import { type ChainEndpoint, localChainDefinition } from "../devchain/index.js";
import { type DevState, readDevState } from "./dev-state.js";

/** The `pgtoll dev` running on `config`'s data directory, as its state file tells. Throws when none runs. */
export async function runningDevStack(config: Config): Promise<DevState> {
  const state = await readDevState(config.dataDir);
  if (!state) {
    throw new Error(
      `no pgtoll dev is running on the data directory ${config.dataDir} (start one with npm run dev)`,
    );
  }
  return state;
}

export function devChainEndpoint(state: DevState): ChainEndpoint {
  return { rpcUrl: state.rpcUrl, chain: localChainDefinition(state.rpcUrl, state.chainId) };
}

/** The error a dev command gives when the chain in the state file does not answer, else `error` itself. */
export function chainDownError(state: DevState, error: unknown): Error {
  const message = (error as Error).message;
  if (/fetch failed|ECONNREFUSED|HTTP request failed/i.test(message)) {
    return new Error(`the local chain at ${state.rpcUrl} does not answer: is pgtoll dev still running?`);
  }
  return error as Error;
}

/**
 * Superuser URL of `database` (default: pgtoll's metadata database) on the running dev stack's embedded
 * PostgreSQL. Throws when the dev stack runs on DATABASE_URL's server instead, with `otherwise` (what to do then).
 */
export async function devClusterUrl(
  config: Config,
  state: DevState,
  otherwise: string,
  database?: string,
): Promise<string> {
  const url = state.cluster
    ? await embeddedClusterUrl(config.dataDir, state.cluster.port, database ?? state.cluster.metadataDatabase)
    : null;
  if (!url) {
    throw new Error(
      `the pgtoll dev on this data directory runs on DATABASE_URL's PostgreSQL, not an embedded one: ${otherwise}`,
    );
  }
  return url;
}
