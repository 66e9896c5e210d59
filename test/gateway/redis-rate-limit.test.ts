import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";

const REDIS_URL = process.env.PGTOLL_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The machine's Redis, when there is one: this test is the extra coverage the README commands do not need. */
async function redisReachable(): Promise<boolean> {
  const { hostname, port } = new URL(REDIS_URL);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port || 6379) });
    socket.setTimeout(1000);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

const haveRedis = await redisReachable();
let db: TestDatabase | undefined;
const dirs: string[] = [];
afterAll(async () => {
  await db?.drop();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!haveRedis)("rate limits shared through Redis", () => {
  it("two pgtoll processes on one REDIS_URL enforce one limit", async () => {
    db = await createTestDatabase("redis");
    const env = async () => {
      const dir = await mkdtemp(join(tmpdir(), "pgtoll-redis-"));
      dirs.push(dir);
      return {
        PGTOLL_DATA_DIR: dir,
        PGTOLL_HTTP_PORT: "0",
        DATABASE_URL: db!.url,
        REDIS_URL,
        PGTOLL_RATE_LIMIT: "on",
        PGTOLL_TRUST_PROXY: "on",
      };
    };
    const a = runCli(["start"], await env());
    const b = runCli(["start"], await env());
    try {
      const [readyA, readyB] = await Promise.all([a.waitFor(/^pgtoll ready/), b.waitFor(/^pgtoll ready/)]);
      const urls = [readyA, readyB].map((line) => /(http:\/\/\S+)/.exec(line)![1]);
      // A client address of its own, so that runs never share counters.
      const client = `198.51.100.${Math.floor(Math.random() * 250) + 1}`;
      const statuses: number[] = [];
      const remaining: string[] = [];
      for (let i = 0; i < 12; i++) {
        const res = await fetch(`${urls[i % 2]}/api/deposit`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": client },
          body: "{}",
        });
        statuses.push(res.status);
        remaining.push(res.headers.get("x-ratelimit-remaining") ?? "");
      }
      // 10 deposits per window across both processes, then 429 from either
      expect(statuses.slice(0, 10).every((s) => s === 400)).toBe(true);
      expect(statuses.slice(10)).toEqual([429, 429]);
      expect(remaining.slice(0, 10)).toEqual(["9", "8", "7", "6", "5", "4", "3", "2", "1", "0"]);
    } finally {
      a.child.kill("SIGTERM");
      b.child.kill("SIGTERM");
      await Promise.all([a.exited, b.exited]);
    }
  }, 120_000);
});
