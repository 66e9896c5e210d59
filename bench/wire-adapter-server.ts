/**
 * The REST "through the wire pipeline" side: a fastify route that answers `POST /api/query` by running the query
 * through pgtoll's wire proxy, as the agent, on proxy sessions with `pgtoll.synchronous_charges` on: the query's
 * answer ends only once its charge is written to the ledger, as the REST spec wants of its answer. The proxy is a
 * pgtoll of its own in this process, on the benchmark's ledger, reached through in-process connections (no TCP):
 * what a REST adapter over the statement pipeline costs, next to pgtoll's own REST path.
 * Run as its own process by the benchmark (`node --import tsx bench/wire-adapter-server.ts`); prints
 * "wire-adapter ready <url>".
 */
import Fastify from "fastify";
import postgres from "postgres";
import type { Hex } from "viem";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/log.js";
import { createAgentToken } from "../src/proxy/agent-token.js";
import { startServer } from "../src/server.js";

const poolSize = Number(process.env.BASELINE_POOL_SIZE ?? 5);
const providerId = process.env.WIRE_ADAPTER_PROVIDER_ID ?? "";
const agentKey = (process.env.WIRE_ADAPTER_AGENT_KEY ?? "") as Hex;
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
// postgres.js takes a socket of its own making (an option its type definitions leave out).
const inProcess: object = { socket: () => pgtoll.connectInProcess() };
// postgres.js pipelines: a request's query is sent while the session's earlier one waits for its charge.
const sql = postgres({
  ...inProcess,
  user: process.env.WIRE_ADAPTER_AGENT_WALLET,
  database: providerId,
  pass: () => createAgentToken(agentKey, providerId),
  connection: { "pgtoll.synchronous_charges": "on" },
  max: Number(process.env.WIRE_ADAPTER_SESSIONS ?? poolSize),
  onnotice: () => {},
});

const app = Fastify();
app.post<{ Body: { sql: string; params?: unknown[] } }>("/api/query", async (request) => {
  // Prepared: postgres.js pipelines only statements whose parameter types it knows.
  const rows = await sql.unsafe(request.body.sql, (request.body.params ?? []) as never[], { prepare: true });
  return { rows: [...rows], rowCount: rows.count };
});

const address = await app.listen({ host: "127.0.0.1", port: 0 });
console.log(`wire-adapter ready ${address}`);
