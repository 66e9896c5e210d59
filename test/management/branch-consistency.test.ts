import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { physicalOf, query } from "./physical.js";
import { clusterUrlFor, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
beforeAll(async () => {
  h = await startManagement({ settings: { fenceGraceMs: 1500 } });
  key = (await h.bootstrap()).key;
});
afterAll(async () => {
  await h?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A client of the parent that keeps committing numbered rows, reconnecting whenever its session is ended or
 * refused, and retrying a row until its commit is acknowledged. Records when each acknowledgement arrived.
 */
function startWriter(url: string) {
  const acknowledged = new Map<number, number>();
  let stop = false;
  let reconnects = 0;
  const done = (async () => {
    let client: pg.Client | null = null;
    let next = 1;
    while (!stop) {
      try {
        if (!client) {
          client = new pg.Client({ connectionString: url });
          client.on("error", () => {});
          await client.connect();
        }
        await client.query("INSERT INTO ledger (seq) VALUES ($1) ON CONFLICT DO NOTHING", [next]);
        acknowledged.set(next, Date.now());
        next++;
      } catch {
        reconnects++;
        await client?.end().catch(() => {});
        client = null;
        await sleep(5);
      }
    }
    await client?.end().catch(() => {});
  })();
  return {
    acknowledged,
    get reconnects() {
      return reconnects;
    },
    async stop() {
      stop = true;
      await done;
    },
  };
}

describe("a data branch of a parent in use", () => {
  it("holds every commit acknowledged before its creation point, as a prefix, and the parent loses nothing", async () => {
    const created = (await h.call(key, "POST", "/projects", { project: { name: "busy" } })).json();
    const mainId = created.branch.id as string;
    await query(
      h,
      mainId,
      "CREATE TABLE ledger (seq int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())",
    );
    const parent = await physicalOf(h, mainId);
    const url = clusterUrlFor(parent.database, { name: parent.role, password: parent.password });
    const writer = startWriter(url);
    // a transaction in flight when the copy starts: it finishes within the grace period and is not cut short
    const slow = new pg.Client({ connectionString: url });
    slow.on("error", () => {});
    await slow.connect();
    while (writer.acknowledged.size < 50) await sleep(10);

    const inFlight = (async () => {
      await slow.query("BEGIN");
      await slow.query("INSERT INTO ledger (seq) VALUES (-1)");
      await sleep(400);
      await slow.query("COMMIT");
    })();
    await sleep(50);
    const response = await h.call(key, "POST", `/projects/${created.project.id}/branches`, {
      branch: { name: "snapshot" },
    });
    await inFlight;
    await slow.end().catch(() => {});
    const acknowledgedThen = writer.acknowledged.size;
    while (writer.acknowledged.size < acknowledgedThen + 50) await sleep(10);
    await writer.stop();

    expect(response.statusCode, response.body).toBe(201);
    const branch = response.json().branch;
    const copyPoint = Date.parse(branch.parent_timestamp);
    const inBranch = (await query<{ seq: number }>(h, branch.id, "SELECT seq FROM ledger ORDER BY seq")).map(
      (r) => r.seq,
    );
    const inParent = new Set(
      (await query<{ seq: number }>(h, mainId, "SELECT seq FROM ledger")).map((r) => r.seq),
    );

    // the writer went on committing after the copy, and had to reconnect at least once
    const acknowledgedAfter = [...writer.acknowledged.values()].filter((at) => at > copyPoint);
    expect(acknowledgedAfter.length).toBeGreaterThan(0);
    expect(writer.reconnects).toBeGreaterThan(0);
    // every acknowledged commit is in the parent
    for (const seq of writer.acknowledged.keys()) expect(inParent.has(seq)).toBe(true);
    // every commit acknowledged before the copy point is in the branch
    for (const [seq, at] of writer.acknowledged) if (at < copyPoint) expect(inBranch).toContain(seq);
    // the branch is a consistent cut: the slow transaction, and numbered rows 1..n without a gap
    expect(inBranch[0]).toBe(-1);
    const numbered = inBranch.filter((seq) => seq > 0);
    expect(numbered).toEqual(numbered.map((_, i) => i + 1));
    expect(inParent.has(-1)).toBe(true);
    // and nothing from after the copy point
    const latest = Math.max(...numbered);
    expect(latest).toBeLessThan(Math.max(...writer.acknowledged.keys()));
  }, 60_000);

  it("ends a transaction still open after the grace period; its uncommitted rows are in neither branch", async () => {
    const created = (await h.call(key, "POST", "/projects", { project: { name: "stuck" } })).json();
    const mainId = created.branch.id as string;
    await query(h, mainId, "CREATE TABLE t (v text); INSERT INTO t VALUES ('committed')");
    const parent = await physicalOf(h, mainId);
    const stuck = new pg.Client({
      connectionString: clusterUrlFor(parent.database, { name: parent.role, password: parent.password }),
    });
    stuck.on("error", () => {});
    await stuck.connect();
    await stuck.query("BEGIN");
    await stuck.query("INSERT INTO t VALUES ('uncommitted')");

    const started = Date.now();
    const response = await h.call(key, "POST", `/projects/${created.project.id}/branches`, {});
    expect(response.statusCode).toBe(201);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    await expect(stuck.query("COMMIT")).rejects.toThrow();
    await stuck.end().catch(() => {});
    const values = (branchId: string) =>
      query<{ v: string }>(h, branchId, "SELECT v FROM t").then((rows) => rows.map((r) => r.v));
    expect(await values(response.json().branch.id)).toEqual(["committed"]);
    expect(await values(mainId)).toEqual(["committed"]);
  }, 30_000);
});
