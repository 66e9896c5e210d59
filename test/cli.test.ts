import { existsSync, readdirSync, readFileSync } from "node:fs";
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
/** Pids whose parent is `pid`, from /proc (field 4 of /proc/<pid>/stat, after the parenthesised name). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return children;
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

  it("comes back after a crash: its Node process killed alone (PostgreSQL left running), then everything killed", async () => {
    const dir = await dataDir();
    const env = { PGTOLL_DATA_DIR: dir, PGTOLL_HTTP_PORT: "0", DATABASE_URL: "" };
    const postmasterPid = () =>
      Number.parseInt(readFileSync(join(dir, "postgres", "postmaster.pid"), "utf8").split("\n")[0]!, 10);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const healthy = async (cli: ReturnType<typeof runCli>) => {
      const url = /(http:\/\/\S+)/.exec(await cli.waitFor(/^pgtoll ready/))?.[1];
      expect((await fetch(`${url}/api/health`)).status).toBe(200);
    };

    // As the OOM killer would: the Node process alone; its embedded PostgreSQL keeps running.
    const first = runCli(["start"], env);
    await healthy(first);
    const orphan = postmasterPid();
    first.child.kill("SIGKILL");
    await first.exited;
    expect(alive(orphan)).toBe(true);
    const second = runCli(["start"], env);
    try {
      await healthy(second);
      expect(alive(orphan)).toBe(false);
      const warning = second
        .stderr()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line))
        .find((line) => /was still running/.test(line.msg));
      expect(warning).toMatchObject({ pid: orphan });

      // Everything at once: Node, the postmaster and its children, with no chance to shut down.
      const postmaster = postmasterPid();
      const children = childrenOf(postmaster);
      for (const pid of [second.child.pid!, postmaster, ...children]) process.kill(pid, "SIGKILL");
      await second.exited;
    } finally {
      second.child.kill("SIGKILL");
    }
    // PostgreSQL's crash recovery at the next start.
    const third = runCli(["start"], env);
    try {
      await healthy(third);
    } finally {
      third.child.kill("SIGTERM");
    }
    expect(await third.exited).toBe(0);
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

  it("refuses an unknown flag, names it and the known flag nearest to it", async () => {
    const cli = runCli(["start", "--htp-port", "1"]);
    expect(await cli.exited).toBe(1);
    expect(cli.stderr()).toMatch(/--htp-port is not a known option \(did you mean --http-port\?\)/);
  });
});

describe("pgtoll COMMAND --help", () => {
  it.each([
    ["start", /^Usage: pgtoll start \[options\][\s\S]*--http-port/],
    ["dev", /^Usage: pgtoll dev \[options\][\s\S]*--data-dir/],
    ["agent-token", /pgtoll agent-token --provider ID/],
    ["mcp", /pgtoll mcp --provider ID/],
    ["pay-query", /pgtoll pay-query --provider ID --sql SQL/],
    ["dev-transfer", /^Usage: pgtoll dev-transfer --amount USDC/],
    ["dev-wallet", /^Usage: pgtoll dev-wallet \[--usdc USDC\]/],
    ["dev-provider-db", /^Usage: pgtoll dev-provider-db \[--name NAME\]/],
    ["admin", /pgtoll admin bootstrap --email EMAIL/],
    ["version", /^Usage: pgtoll version/],
    ["help", /^pgtoll: metered SQL access/],
  ])("pgtoll %s answers --help and -h with its usage and exits 0", async (command, usage) => {
    for (const flag of ["--help", "-h"]) {
      // Required flags missing and another option given: the request for usage wins.
      const cli = runCli([command, "--http-port", "1", flag], { PGTOLL_AGENT_KEY: "" });
      expect(await cli.exited, `${command} ${flag}: ${cli.stderr()}`).toBe(0);
      expect(cli.stdout()).toMatch(usage);
      expect(cli.stderr()).toBe("");
    }
  });

  it("answers pgtoll help COMMAND with the command's usage, and an unknown command with status 2", async () => {
    const known = runCli(["help", "dev-transfer"]);
    expect(await known.exited).toBe(0);
    expect(known.stdout()).toMatch(/^Usage: pgtoll dev-transfer/);
    const unknown = runCli(["help", "constructor"]);
    expect(await unknown.exited).toBe(2);
    expect(unknown.stderr()).toMatch(/unknown command "constructor"/);
  });

  it("names the nearest flag of a command that has its own flags", async () => {
    const payQuery = runCli(["pay-query", "--provder", "x", "--sql", "SELECT 1"]);
    expect(await payQuery.exited).toBe(1);
    expect(payQuery.stderr()).toMatch(/--provder is not a known option \(did you mean --provider\?\)/);
    const admin = runCli(["admin", "bootstrap", "--emial", "a@b.c"]);
    expect(await admin.exited).toBe(1);
    expect(admin.stderr()).toMatch(/did you mean --email\?/);
    const token = runCli(["agent-token", "--url", "postgres://x", "--provder", "x"]);
    expect(await token.exited).toBe(2);
    expect(token.stderr()).toMatch(/did you mean --provider\?/);
  });
});
