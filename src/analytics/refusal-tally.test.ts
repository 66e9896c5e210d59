import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase } from "../../test/support/database.js";
import { insertProvider } from "../../test/support/fixtures.js";
import { refusalCounts } from "./refusal-counts.js";
import { RefusalTally } from "./refusal-tally.js";

let meta: Awaited<ReturnType<typeof createMetadataDatabase>>;
let providerId: string;
const range = () => ({ from: new Date(Date.now() - 3_600_000), to: new Date(Date.now() + 3_600_000) });

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerId = await insertProvider(meta.pool);
});
afterAll(async () => meta?.close());

describe("RefusalTally", () => {
  it("adds each flush to the provider's row of the hour, one row per rule", async () => {
    const tally = new RefusalTally();
    tally.count(providerId, "policy", "no-drop");
    tally.count(providerId, "policy", "no-drop");
    tally.count(providerId, "funds", "insufficient-balance");
    await tally.flushTo(meta.pool);
    expect(tally.pending).toBe(0);
    tally.count(providerId, "policy", "no-drop");
    await tally.flushTo(meta.pool);
    expect(await refusalCounts(meta.pool, providerId, range())).toEqual([
      { kind: "policy", rule: "no-drop", refusals: 3 },
      { kind: "funds", rule: "insufficient-balance", refusals: 1 },
    ]);
    const { rows } = await meta.pool.query(
      "SELECT count(*)::int AS n FROM refusal_counts WHERE provider_id = $1",
      [providerId],
    );
    expect(rows[0].n).toBe(2);
  });

  it("keeps the counts a failed flush could not write, for the next", async () => {
    const other = await insertProvider(meta.pool);
    const tally = new RefusalTally();
    tally.count(other, "policy", "no-truncate");
    const gone = await createMetadataDatabase();
    await gone.close();
    await expect(tally.flushTo(gone.pool)).rejects.toThrow();
    expect(tally.pending).toBe(1);
    tally.count(other, "policy", "no-truncate");
    await tally.flushTo(meta.pool);
    expect(await refusalCounts(meta.pool, other, range())).toEqual([
      { kind: "policy", rule: "no-truncate", refusals: 2 },
    ]);
  });

  it("hands the metrics the counts since their last read", () => {
    const tally = new RefusalTally();
    tally.count(providerId, "policy", "no-drop");
    expect(tally.drainForMetrics()).toEqual([{ providerId, kind: "policy", rule: "no-drop", refusals: 1 }]);
    expect(tally.drainForMetrics()).toEqual([]);
  });
});
