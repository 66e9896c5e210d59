/**
 * The REST "through the wire pipeline" side: a fastify route that answers `POST /api/query` by running the query
 * through pgtoll's wire proxy, as the agent, on pipelined sessions with `pgtoll.synchronous_charges` on: the
 * query's answer ends only once its charge is written to the ledger, as the REST spec wants of its answer. The
 * proxy is a pgtoll of its own in this process, on the benchmark's ledger, reached through in-process connections
 * opened for the agent (no TCP, no token): what a REST adapter over the statement pipeline costs, next to
 * pgtoll's own REST path.
 * Run as its own process by the benchmark (`node --import tsx bench/wire-adapter-server.ts`); prints
 * "wire-adapter ready <url>".
 */
import Fastify from "fastify";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/log.js";
import { AgentSessions } from "../src/rest/agent-sessions.js";
import { startServer } from "../src/server.js";

const poolSize = Number(process.env.BASELINE_POOL_SIZE ?? 5);
const providerId = process.env.WIRE_ADAPTER_PROVIDER_ID ?? "";
const wallet = process.env.WIRE_ADAPTER_AGENT_WALLET ?? "";
const config = loadConfig(
  {
    DATABASE_URL: process.env.WIRE_ADAPTER_LEDGER_URL,
    PGTOLL_DATA_DIR: process.env.WIRE_ADAPTER_DATA_DIR,
    PGTOLL_SECRET_KEY: process.env.WIRE_ADAPTER_SECRET_KEY,
    PGTOLL_HOST: "127.0.0.1",
    PGTOLL_HTTP_PORT: "0",
    PGTOLL_PROXY_PORT: "0",
    PGTOLL_RATE_LIMIT: "off",
    PGTOLL_PROVIDER_HOSTS: "any",
  },
  [],
);
const pgtoll = await startServer(config, createLogger(process.env.LOG_LEVEL ?? "warn"));
const sessions = new AgentSessions({
  connect: (agent) => pgtoll.connectInProcess(agent),
  connectForCancel: () => pgtoll.connectInProcess(),
  perAgent: Number(process.env.WIRE_ADAPTER_SESSIONS ?? poolSize),
  idleMs: 60_000,
  settings: { "pgtoll.synchronous_charges": "on" },
});

const app = Fastify();
app.post<{ Body: { sql: string; params?: unknown[] } }>("/api/query", async (request) => {
  const session = await sessions.session(wallet, providerId);
  const answer = await session.query(request.body.sql, request.body.params ?? []);
  const last = answer.statements.at(-1);
  return { rows: last?.rows ?? [], rowCount: last?.rowCount ?? 0 };
});

// An exit of its own on SIGTERM: pgtoll's charges are written, and --cpu-prof writes its profile.
process.once("SIGTERM", () => {
  sessions.closeAll();
  void app
    .close()
    .then(() => pgtoll.stop())
    .finally(() => process.exit(0));
});

const address = await app.listen({ host: "127.0.0.1", port: 0 });
console.log(`wire-adapter ready ${address}`);
