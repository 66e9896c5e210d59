import { join } from "node:path";
import type { PgEndpoint } from "./bench-cluster.js";
import { spawnNodeUntilReady, stopChild } from "./ready-child.js";

export interface NodeRelayProcess {
  pid: number;
  /** pgbench connects here as it would to PostgreSQL itself. */
  endpoint: PgEndpoint;
  stop(): Promise<void>;
}

/** Starts bench/node-relay.ts as its own process (so its CPU is its own) in front of `upstream`. */
export async function startNodeRelay(
  root: string,
  scratchDir: string,
  upstream: PgEndpoint,
): Promise<NodeRelayProcess> {
  const { child, line } = await spawnNodeUntilReady(
    ["--import", "tsx", join(root, "bench", "node-relay.ts"), upstream.host, String(upstream.port)],
    {
      cwd: root,
      env: { ...process.env, NODE_OPTIONS: "" },
      logFile: join(scratchDir, "node-relay.log"),
      readyPrefix: "relay listening on",
    },
  );
  const port = Number(line.split(" ").at(-1));
  return {
    pid: child.pid!,
    endpoint: { ...upstream, host: "127.0.0.1", port },
    stop: () => stopChild(child, 5_000),
  };
}
