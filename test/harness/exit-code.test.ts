import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const vitestBin = fileURLToPath(new URL("../../node_modules/vitest/vitest.mjs", import.meta.url));

interface Run {
  fixture: string;
  /** An extra global setup from fixtures/ that fails. */
  globalFixture?: string;
  /** "embedded" starts the embedded PostgreSQL as `npm test` does by default; otherwise the URL to use. */
  database: "embedded" | string;
}

/** Runs one fixture file with the project's own vitest configuration, in a child process, as `npm test` would. */
async function runFixture(run: Run): Promise<{ code: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = {};
  // The child is a fresh vitest, not a worker of this one.
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(VITEST|TEST$|NODE_ENV$|PGTOLL_)/.test(key)) env[key] = value;
  }
  if (run.database !== "embedded") env.PGTOLL_TEST_DATABASE_URL = run.database;
  if (run.globalFixture) env.PGTOLL_HARNESS_GLOBAL_FIXTURE = run.globalFixture;
  const child = spawn(
    process.execPath,
    [
      vitestBin,
      "run",
      "--config",
      "test/harness/vitest.fixtures.config.ts",
      `test/harness/fixtures/${run.fixture}`,
    ],
    { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  return { code, output };
}

describe("the test command's exit code", () => {
  const given = inject("adminDatabaseUrl");

  it("is 0 for a run of passing tests on the embedded PostgreSQL (the control)", async () => {
    const { code, output } = await runFixture({ fixture: "passing.fixture.ts", database: "embedded" });
    expect(code, output).toBe(0);
  });

  it("is non-zero when an assertion fails, with the embedded PostgreSQL started by the global setup", async () => {
    const { code, output } = await runFixture({
      fixture: "failing-assertion.fixture.ts",
      database: "embedded",
    });
    expect(output).toMatch(/1 failed/);
    expect(code, output).not.toBe(0);
  });

  it("is non-zero when a suite fails to load", async () => {
    const { code, output } = await runFixture({ fixture: "failing-import.fixture.ts", database: given });
    expect(output).toContain("SyntaxError");
    expect(code, output).not.toBe(0);
  });

  it("is non-zero when a global setup fails", async () => {
    const { code, output } = await runFixture({
      fixture: "passing.fixture.ts",
      globalFixture: "failing-setup.global.ts",
      database: given,
    });
    expect(output).toContain("global setup failed on purpose");
    expect(code, output).not.toBe(0);
  });

  it("is non-zero when a global teardown fails, though every test passed", async () => {
    const { code, output } = await runFixture({
      fixture: "passing.fixture.ts",
      globalFixture: "failing-teardown.global.ts",
      database: given,
    });
    expect(output).toContain("global teardown failed on purpose");
    expect(code, output).not.toBe(0);
  });

  it("is non-zero when PGTOLL_TEST_DATABASE_URL cannot be reached", async () => {
    const { code, output } = await runFixture({
      fixture: "passing.fixture.ts",
      database: "postgres://nobody@127.0.0.1:1/none",
    });
    expect(output).toContain("PGTOLL_TEST_DATABASE_URL (127.0.0.1:1) cannot be reached");
    expect(code, output).not.toBe(0);
  });
});
