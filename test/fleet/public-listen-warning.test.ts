import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { startPgtollProcess } from "../support/pgtoll-process.js";

let meta: { db: TestDatabase; close(): Promise<void> };
beforeAll(async () => {
  meta = await createMetadataDatabase();
}, 120_000);
afterAll(async () => {
  await meta?.close();
});

const WARNING =
  /anyone who knows an agent's wallet address can spend its balance.*PGTOLL_REST_AGENT_AUTH=signature/;

describe("pgtoll start with wallet-trusting REST agent authentication", () => {
  it("warns, naming signature, when it listens on every address", async () => {
    const gateway = await startPgtollProcess(meta.db.url, { PGTOLL_HOST: "0.0.0.0" });
    expect(await gateway.stop()).toBe(0);
    expect(gateway.cli.stderr()).toMatch(WARNING);
  });

  it("says nothing on loopback, nor with signature on every address", async () => {
    const loopback = await startPgtollProcess(meta.db.url);
    const signed = await startPgtollProcess(meta.db.url, {
      PGTOLL_HOST: "0.0.0.0",
      PGTOLL_REST_AGENT_AUTH: "signature",
    });
    expect(await loopback.stop()).toBe(0);
    expect(await signed.stop()).toBe(0);
    expect(loopback.cli.stderr()).not.toMatch(WARNING);
    expect(signed.cli.stderr()).not.toMatch(WARNING);
  });
});
