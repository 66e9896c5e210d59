import { existsSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * What a running `pgtoll dev` tells other commands of the same data directory (`pgtoll dev-transfer`,
 * `pgtoll dev-wallet`, `pgtoll dev-provider-db`) about its chain and cluster. Written once the stack is up,
 * removed when it stops. Holds no key: the agent is named by its index among hardhat's dev accounts, and the
 * cluster's credentials stay in the data directory's `credentials.json`.
 */
export interface DevState {
  rpcUrl: string;
  chainId: number;
  tokenAddress: `0x${string}`;
  agentAccountIndex: number;
  providerId: string;
  providerWallet: `0x${string}`;
  /**
   * pgtoll's embedded PostgreSQL, when it runs one (no DATABASE_URL): its port and pgtoll's metadata database.
   * Its credentials stay in the data directory's `credentials.json`.
   */
  cluster?: { port: number; metadataDatabase: string };
}

const FILE = "dev-stack.json";

export function devStatePath(dataDir: string): string {
  return join(dataDir, FILE);
}

export async function writeDevState(dataDir: string, state: DevState): Promise<void> {
  await writeFile(devStatePath(dataDir), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

/** The state of the `pgtoll dev` running on `dataDir`, or null when none is. */
export async function readDevState(dataDir: string): Promise<DevState | null> {
  const file = devStatePath(dataDir);
  if (!existsSync(file)) return null;
  return JSON.parse(await readFile(file, "utf8")) as DevState;
}

export async function removeDevState(dataDir: string): Promise<void> {
  await rm(devStatePath(dataDir), { force: true });
}
