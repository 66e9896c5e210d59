import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "./support/cli.js";

const dirs: string[] = [];
async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-cli-"));
  dirs.push(dir);
  return dir;
}
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("pgtoll start", () => {
  it("starts an embedded PostgreSQL, serves HTTP, refuses a second start on the same data directory, and stops cleanly", async () => {
    const dir = await dataDir();
    const env = { PGTOLL_DATA_DIR: dir, PGTOLL_HTTP_PORT: "0", DATABASE_URL: "" };
    const first = runCli(["start"], env);
    try {
      const ready = await first.waitFor(/^pgtoll ready/);
      const url = /(http:\/\/\S+)/.exec(ready)?.[1];
      expect(url).toBeDefined();
      const health = await fetch(`${url}/api/health`);
      expect(health.status).toBe(200);
      expect(existsSync(join(dir, "postgres", "PG_VERSION"))).toBe(true);
      expect(existsSync(join(dir, "secret.key"))).toBe(true);

      const second = runCli(["start", "--http-port", "0"], env);
      expect(await second.exited).toBe(1);
      expect(second.stderr()).toMatch(/data directory .* is in use by another pgtoll process/);
    } finally {
      first.child.kill("SIGTERM");
    }
    expect(await first.exited).toBe(0);
    expect(existsSync(join(dir, "postgres", "postmaster.pid"))).toBe(false);
    expect(existsSync(join(dir, "pgtoll.pid"))).toBe(false);

    // migrations are idempotent: a restart on the same directory works
    const again = runCli(["start"], env);
    try {
      await again.waitFor(/^pgtoll ready/);
    } finally {
      again.child.kill("SIGINT");
    }
    expect(await again.exited).toBe(0);
  }, 180_000);

  it.each([
    [{ PGTOLL_HTTP_PORT: "http" }, /PGTOLL_HTTP_PORT must be a whole number/],
    [{ PGTOLL_RATE_LIMIT: "maybe" }, /PGTOLL_RATE_LIMIT must be "on" or "off"/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL must use postgres: or postgresql:/],
    [{ PGTOLL_TOKEN_ADDRESS: "0x12" }, /PGTOLL_TOKEN_ADDRESS must be 0x followed by 40 hex digits/],
    [{ PGTOLL_SECRET_KEY: "short" }, /PGTOLL_SECRET_KEY must be 32 bytes/],
  ])("refuses bad configuration %j with a message naming the variable", async (env, message) => {
    const cli = runCli(["start"], { PGTOLL_DATA_DIR: await dataDir(), ...env });
    expect(await cli.exited).toBe(1);
    expect(cli.stderr()).toMatch(message);
  });

  it("refuses an unknown flag and names it", async () => {
    const cli = runCli(["start", "--htp-port", "1"]);
    expect(await cli.exited).toBe(1);
    expect(cli.stderr()).toMatch(/--htp-port is not a known option/);
  });
});
