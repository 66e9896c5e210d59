import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { LogBuffer } from "./log-buffer.js";

function recordingSink() {
  const writes: string[] = [];
  let syncFlushes = 0;
  return {
    writes,
    syncFlushes: () => syncFlushes,
    sink: {
      write(data: string) {
        writes.push(data);
        return true;
      },
      flushSync() {
        syncFlushes++;
      },
    },
  };
}

/** Runs `body` in a child Node process with pgtoll's logger; resolves with its stderr lines as they came. */
function childLog(body: string): Promise<{ lines: string[]; arrivals: number[]; exitedAt: number }> {
  const script = `import { createLogger } from "./src/log.ts"; const logger = createLogger("info"); ${body}`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: new URL("..", import.meta.url).pathname,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const lines: string[] = [];
  const arrivals: number[] = [];
  let partial = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      arrivals.push(performance.now());
    }
  });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", () => resolve({ lines, arrivals, exitedAt: performance.now() }));
  });
}

describe("LogBuffer", () => {
  it("writes a lone line within a few milliseconds, not when more lines come", async () => {
    const { writes, sink } = recordingSink();
    const buffer = new LogBuffer(sink);
    buffer.write('{"msg":"one"}\n');
    expect(writes).toEqual([]);
    await sleep(40);
    expect(writes).toEqual(['{"msg":"one"}\n']);
  });

  it("writes the lines of a busy moment together, in order, once 4 KB wait", () => {
    const { writes, sink } = recordingSink();
    const buffer = new LogBuffer(sink);
    const lines = Array.from({ length: 300 }, (_, i) => `{"msg":"request completed","n":${i}}\n`);
    for (const line of lines) buffer.write(line);
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.length).toBeLessThan(5);
    buffer.flush();
    expect(writes.join("")).toBe(lines.join(""));
  });

  it("flushSync writes what waits and asks the sink to finish its writes", () => {
    const { writes, sink, syncFlushes } = recordingSink();
    const buffer = new LogBuffer(sink);
    buffer.write("a\n");
    buffer.write("b\n");
    buffer.flushSync();
    expect(writes).toEqual(["a\nb\n"]);
    expect(syncFlushes()).toBe(1);
  });
});

describe("pgtoll's log stream", () => {
  it("writes every line a process logged before process.exit", async () => {
    const { lines } = await childLog(
      'for (let i = 0; i < 3000; i++) logger.info({ i }, "line"); process.exit(0);',
    );
    expect(lines).toHaveLength(3000);
    expect(lines.map((line) => (JSON.parse(line) as { i: number }).i)).toEqual(
      Array.from({ length: 3000 }, (_, i) => i),
    );
  }, 30_000);

  it("writes the lines of an uncaught exception's process", async () => {
    const { lines } = await childLog('logger.error("about to fail"); throw new Error("boom");');
    expect(lines.some((line) => line.includes('"about to fail"'))).toBe(true);
  }, 30_000);

  it("writes a line of a quiet process promptly, long before the process ends", async () => {
    const { lines, arrivals, exitedAt } = await childLog(
      'logger.info("ready"); setTimeout(() => process.exit(0), 1500);',
    );
    expect(lines).toHaveLength(1);
    expect(exitedAt - arrivals[0]!).toBeGreaterThan(1000);
  }, 30_000);
});
