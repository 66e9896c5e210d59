import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase } from "../../test/support/database.js";
import { insertProvider } from "../../test/support/fixtures.js";
import { ProviderCache } from "./provider-cache.js";
import { setPricing } from "./registry.js";

let meta: Awaited<ReturnType<typeof createMetadataDatabase>>;

beforeAll(async () => {
  meta = await createMetadataDatabase();
});
afterAll(async () => meta?.close());

const price = (micro: bigint) => ({ priceMicroPer1000Rows: micro, markupPpm: 1_000_000n });

describe("ProviderCache", () => {
  it("sees pricing set through this process at once", async () => {
    const id = await insertProvider(meta.pool);
    const cache = new ProviderCache(meta.pool, { ttlMs: 60_000 });
    expect((await cache.find(id))?.pricing).toBeNull();
    await setPricing(meta.pool, id, price(1_000n));
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(1_000n);
    await setPricing(meta.pool, id, price(2_000n));
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(2_000n);
  });

  it("sees pricing changed by another process once its entry expired", async () => {
    const id = await insertProvider(meta.pool);
    await setPricing(meta.pool, id, price(1_000n));
    const cache = new ProviderCache(meta.pool, { ttlMs: 200 });
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(1_000n);
    // What another gateway process does: the same table, without this process's setPricing.
    await meta.pool.query("UPDATE pricing SET price_micro_per_1000_rows = 5000 WHERE provider_id = $1", [id]);
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(1_000n);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(5_000n);
  });

  it("does not remember a provider it did not find", async () => {
    const cache = new ProviderCache(meta.pool, { ttlMs: 60_000 });
    const id = "00000000-0000-4000-8000-00000000abcd";
    expect(await cache.find(id)).toBeNull();
    await meta.pool.query(
      `INSERT INTO providers (id, name, email, wallet_address, connection_secret, api_key_hash)
       VALUES ($1, 'p', 'late@example.com', '0x00000000000000000000000000000000000000ab', 'x', '\\x00')`,
      [id],
    );
    await meta.pool.query(
      `INSERT INTO pricing (id, provider_id, price_micro_per_1000_rows, markup_ppm)
       VALUES (gen_random_uuid(), $1, 1000, 1000000)`,
      [id],
    );
    expect((await cache.find(id))?.pricing?.priceMicroPer1000Rows).toBe(1_000n);
  });
});
