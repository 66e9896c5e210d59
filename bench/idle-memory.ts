import pg from "pg";
import type { BenchAgent } from "./metered-agent.js";
import type { PgtollProcess } from "./pgtoll-process.js";

export interface IdleMemoryResult {
  /** Sessions asked for, and how many were open (authenticated, one statement run, idle) when RSS was read. */
  requested: number;
  opened: number;
  /** RSS after a full garbage collection, before opening the sessions and with them open. */
  rssBeforeKiB: number;
  rssAfterKiB: number;
  /** V8 heap in use plus external memory (socket buffers and other Buffers), after a full collection. */
  heapBeforeKiB: number;
  heapAfterKiB: number;
  /** RSS once every session was closed again (how much the process kept). */
  rssAfterCloseKiB: number;
  /** RSS added by the open sessions, in MB (10^6 bytes, as the target is stated). */
  deltaMB: number;
  /** deltaMB scaled to 1 000 sessions. */
  mbPer1000: number;
  kibPerSession: number;
  error?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Memory once the process is quiet and fully garbage-collected (pgtoll runs with bench/gc-probe.ts). */
async function settledMemory(pgtoll: PgtollProcess): Promise<{ rssKiB: number; heapKiB: number }> {
  await sleep(1000);
  const memory = await pgtoll.collectGarbage();
  return { rssKiB: memory.rssKiB, heapKiB: memory.heapUsedKiB + memory.externalKiB };
}

async function openSession(pgtoll: PgtollProcess, agent: BenchAgent, password: string): Promise<pg.Client> {
  const client = new pg.Client({
    host: pgtoll.proxyHost,
    port: pgtoll.proxyPort,
    user: agent.wallet,
    database: agent.providerId,
    password,
    connectionTimeoutMillis: 60_000,
  });
  client.on("error", () => {});
  await client.connect();
  await client.query("SELECT 1");
  return client;
}

/**
 * Memory of idle agent sessions in a pgtoll process of their own: RSS after a full garbage collection, then
 * `sessions` agent sessions
 * opened through the proxy (token checked, upstream session opened, one metered `SELECT 1` run so each holds a
 * reservation, then idle), then RSS after a full collection again. Each proxy session holds its own upstream PostgreSQL session
 * (session pooling), so PostgreSQL must allow that many connections; its memory is not counted here.
 */
export async function measureIdleMemory(
  pgtoll: PgtollProcess,
  agent: BenchAgent,
  sessions: number,
  log: (line: string) => void,
): Promise<IdleMemoryResult> {
  const password = await agent.token();
  // Warm-up: load and compile every code path a session touches, so only per-session memory is counted.
  for (let i = 0; i < 3; i++) {
    const warm = await Promise.all(Array.from({ length: 10 }, () => openSession(pgtoll, agent, password)));
    await Promise.all(warm.map((client) => client.end()));
  }
  const before = await settledMemory(pgtoll);
  const clients: pg.Client[] = [];
  let error: string | undefined;
  const concurrency = 20;
  try {
    for (let opened = 0; opened < sessions; opened += concurrency) {
      const batch = Math.min(concurrency, sessions - opened);
      clients.push(
        ...(await Promise.all(Array.from({ length: batch }, () => openSession(pgtoll, agent, password)))),
      );
      if ((opened + batch) % 250 === 0)
        log(
          `memory: ${opened + batch}/${sessions} sessions open, RSS ${(pgtoll.memory().rssKiB / 1024).toFixed(0)} MiB`,
        );
    }
  } catch (e) {
    error = `stopped after ${clients.length} sessions: ${(e as Error).message}`;
    log(`memory: ${error}`);
  }
  const after = await settledMemory(pgtoll);
  await Promise.all(clients.map((client) => client.end().catch(() => {})));
  const rssAfterCloseKiB = (await settledMemory(pgtoll)).rssKiB;
  const rssBeforeKiB = before.rssKiB;
  const rssAfterKiB = after.rssKiB;
  const deltaMB = ((rssAfterKiB - rssBeforeKiB) * 1024) / 1e6;
  const opened = clients.length;
  return {
    requested: sessions,
    opened,
    rssBeforeKiB,
    rssAfterKiB,
    heapBeforeKiB: before.heapKiB,
    heapAfterKiB: after.heapKiB,
    rssAfterCloseKiB,
    deltaMB,
    mbPer1000: opened > 0 ? (deltaMB * 1000) / opened : Number.NaN,
    kibPerSession: opened > 0 ? (rssAfterKiB - rssBeforeKiB) / opened : Number.NaN,
    ...(error ? { error } : {}),
  };
}
