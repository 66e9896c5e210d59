import { Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { lazyRequestLogger } from "./lazy-request-logger.js";

function parentLogger(level = "info") {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level }, sink) as FastifyBaseLogger, lines };
}

describe("lazyRequestLogger", () => {
  it("makes the child logger only when something is logged, with the request's bindings", () => {
    const { logger, lines } = parentLogger();
    const child = vi.spyOn(logger, "child");
    const log = lazyRequestLogger(logger, { reqId: "r-1" }, {});
    expect(child).not.toHaveBeenCalled();
    expect(log.level).toBe("info");

    log.info({ providerId: "p" }, "provider registered");
    log.error("request failed %s", "badly");
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines).toMatchObject([
      { level: 30, reqId: "r-1", providerId: "p", msg: "provider registered" },
      { level: 50, reqId: "r-1", msg: "request failed badly" },
    ]);
  });

  it("follows the parent's level and a route's own level", () => {
    const { logger, lines } = parentLogger("warn");
    lazyRequestLogger(logger, { reqId: "r-2" }, {}).info("dropped");
    expect(lines).toEqual([]);
    const debugRoute = lazyRequestLogger(logger, { reqId: "r-3" }, { level: "debug" });
    expect(debugRoute.level).toBe("debug");
    debugRoute.debug("kept");
    expect(lines).toMatchObject([{ level: 20, reqId: "r-3", msg: "kept" }]);
  });

  it("makes children of the request's logger", () => {
    const { logger, lines } = parentLogger();
    lazyRequestLogger(logger, { reqId: "r-4" }, {}).child({ step: "charge" }).warn("slow");
    expect(lines).toMatchObject([{ level: 40, reqId: "r-4", step: "charge", msg: "slow" }]);
  });
});
