import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redactedPaths } from "../../src/log.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

const lines: string[] = [];
const failedLines: string[] = [];
let gateway: TestGateway;
let providerDb: TestDatabase;

function sink(into: string[]): Writable {
  return new Writable({
    write(chunk, _encoding, done) {
      into.push(String(chunk));
      done();
    },
  });
}

beforeAll(async () => {
  const logger = pino(
    { level: "trace", redact: { paths: redactedPaths, censor: "[redacted]" } },
    sink(lines),
  );
  gateway = await startTestGateway({ logger });
  providerDb = await createProviderDatabase(1);
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

describe("logs", () => {
  it("carry request ids and never a connection string, password or API key", async () => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url);
    await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey, authorization: "Bearer secret-token" },
      payload: { basePricePer1000Rows: 1, markupMultiplier: 1 },
    });
    const all = lines.join("");
    const password = new URL(providerDb.url).password;
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain(apiKey);
    expect(all).not.toContain(password);
    expect(all).not.toContain("secret-token");
    const records = lines.map((line) => JSON.parse(line) as { reqId?: string; msg: string });
    expect(
      records.filter((r) => r.msg === "request completed").every((r) => typeof r.reqId === "string"),
    ).toBe(true);
    expect(redactedPaths.some((p) => p.includes("authorization"))).toBe(true);
  });

  it("write one line per request once it is answered, with its id, route, status and duration", async () => {
    lines.length = 0;
    const res = await gateway.app.inject({
      method: "GET",
      url: "/api/nothing?x=1",
      remoteAddress: "10.1.2.3",
    });
    expect(res.statusCode).toBe(404);
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records.map((r) => r.msg)).toEqual(["request completed"]);
    const [record] = records;
    expect(record).toMatchObject({
      level: 30,
      reqId: res.headers["x-request-id"],
      method: "GET",
      url: "/api/nothing?x=1",
      statusCode: 404,
      remoteAddress: "10.1.2.3",
    });
    expect(record!.responseTime).toBeTypeOf("number");
    expect(record!.responseTime as number).toBeGreaterThanOrEqual(0);
  });

  it("log a failed request with its request id", async () => {
    const failing = await startTestGateway({ logger: pino({ level: "info" }, sink(failedLines)) });
    try {
      failedLines.length = 0;
      await failing.ctx.db.end();
      const res = await failing.app.inject({ method: "GET", url: `/api/transactions/0x${"a".repeat(40)}` });
      expect(res.statusCode).toBe(500);
      const records = failedLines.map((line) => JSON.parse(line) as Record<string, unknown>);
      const failure = records.find((r) => r.msg === "request failed");
      expect(failure).toMatchObject({ level: 50, reqId: res.headers["x-request-id"] });
      expect(failure!.err).toBeDefined();
      expect(records.find((r) => r.msg === "request completed")).toMatchObject({
        reqId: res.headers["x-request-id"],
        statusCode: 500,
      });
    } finally {
      await failing.app.close();
    }
  });
});
