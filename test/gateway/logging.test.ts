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
let gateway: TestGateway;
let providerDb: TestDatabase;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = pino({ level: "trace", redact: { paths: redactedPaths, censor: "[redacted]" } }, sink);
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
});
