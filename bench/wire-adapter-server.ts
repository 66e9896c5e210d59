/**
 * The REST "through the wire pipeline" side: a fastify route that answers `POST /api/query` by running the query
 * through pgtoll's wire proxy, as the agent, on a pool of proxy sessions with `pgtoll.synchronous_charges` on: the
 * query's answer ends only once its charge is written to the ledger, as the REST spec wants of its answer. It is
 * what a REST adapter over the proxy's statement pipeline costs at least (plus a loopback hop and a second
 * protocol codec that an in-process adapter would save), next to pgtoll's own REST path.
 * Run as its own process by the benchmark (`node --import tsx bench/wire-adapter-server.ts`); prints
 * "wire-adapter ready <url>".
 */
import Fastify from "fastify";
import postgres from "postgres";
import type { Hex } from "viem";
import { createAgentToken } from "../src/proxy/agent-token.js";

const poolSize = Number(process.env.BASELINE_POOL_SIZE ?? 5);
const providerId = process.env.WIRE_ADAPTER_PROVIDER_ID ?? "";
const agentKey = (process.env.WIRE_ADAPTER_AGENT_KEY ?? "") as Hex;
// postgres.js pipelines: a request's query is sent while the session's earlier one waits for its charge.
const sql = postgres({
  host: process.env.WIRE_ADAPTER_PROXY_HOST,
  port: Number(process.env.WIRE_ADAPTER_PROXY_PORT),
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
