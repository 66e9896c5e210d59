import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlPlane } from "../../src/control/control-plane.js";
import { physicalOf } from "./physical.js";
import { clusterUrl, eventually, type ManagementHarness, startManagement } from "./support.js";

// The harness's own process sweeps only when it starts; each test says who sweeps when.
const HOUR = 3_600_000;
let h: ManagementHarness;
let key: string;
let admin: pg.Client;
beforeAll(async () => {
  h = await startManagement({ settings: { sweepIntervalMs: HOUR } });
  key = (await h.bootstrap()).key;
  admin = new pg.Client({ connectionString: clusterUrl() });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await h?.close();
});

const inSeconds = (seconds: number) =>
  new Date(Math.ceil(Date.now() / 1000) * 1000 + seconds * 1000).toISOString().replace(".000Z", "Z");

async function newProject() {
  const created = await h.call(key, "POST", "/projects", { project: { name: "expiry" } });
  expect(created.statusCode, created.body).toBe(201);
  return { projectId: created.json().project.id as string, mainId: created.json().branch.id as string };
}

async function newBranch(projectId: string, branch: object, endpoints: object[] = []) {
  const response = await h.call(key, "POST", `/projects/${projectId}/branches`, { branch, endpoints });
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** Moves a branch's expiry into the past, as time would (the API accepts only future ones). */
async function expireNow(branchId: string) {
  await h.meta.query(
    "UPDATE branches SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1",
    [branchId],
  );
}

const branchStatus = async (projectId: string, branchId: string) =>
  (await h.call(key, "GET", `/projects/${projectId}/branches/${branchId}`)).statusCode;

const databaseExists = async (name: string) =>
  Boolean((await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rowCount);

/** A second process on the same metadata database that sweeps only when told to. */
const startPlane = () =>
  ControlPlane.start(h.meta, h.box, { ...h.settings, sweepIntervalMs: HOUR }, pino({ level: "silent" }));

describe("branch expiry", () => {
  it("deletes a branch once its expires_at passes: operations recorded, endpoint gone, database dropped", async () => {
    const { projectId } = await newProject();
    const expiresAt = inSeconds(2);
    const created = await newBranch(projectId, { name: "short-lived", expires_at: expiresAt }, [
      { type: "read_write" },
    ]);
    const branchId = created.branch.id as string;
    const endpointId = created.endpoints[0].id as string;
    expect(Date.parse(created.branch.expires_at)).toBe(Date.parse(expiresAt));
    const database = (await physicalOf(h, branchId)).database;
    expect(await databaseExists(database)).toBe(true);

    // A process whose periodic sweep runs often finds it expired and deletes it.
    const sweeper = await h.startApp({ settings: { sweepIntervalMs: 200 } });
    try {
      await eventually(async () => ((await branchStatus(projectId, branchId)) === 404 ? true : undefined));
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
      // Recorded as a deletion through the API records it: the endpoint suspended, the timeline deleted.
      const deletion = await eventually(async () => {
        const { operations } = (await h.call(key, "GET", `/projects/${projectId}/operations`)).json();
        const ops = operations.filter(
          (op: { branch_id?: string; action: string }) =>
            op.branch_id === branchId && ["suspend_compute", "delete_timeline"].includes(op.action),
        );
        return ops.length === 2 && ops.every((op: { status: string }) => op.status === "finished")
          ? ops
          : undefined;
      });
      expect(
        deletion.map((op: { action: string; endpoint_id?: string }) => [op.action, op.endpoint_id]),
      ).toEqual([
        ["delete_timeline", undefined],
        ["suspend_compute", endpointId],
      ]);
      expect((await h.call(key, "GET", `/projects/${projectId}/endpoints/${endpointId}`)).statusCode).toBe(
        404,
      );
      expect(await databaseExists(database)).toBe(false);
    } finally {
      await sweeper.close();
    }
  });

  it("accepts RFC 3339 with an offset, removes an expiry with null, and refuses bad values with 400 {code, message}", async () => {
    const { projectId } = await newProject();
    const base = `/projects/${projectId}/branches`;
    const refused = async (method: string, url: string, body: object) => {
      const response = await h.call(key, method, url, body);
      expect(response.statusCode, response.body).toBe(400);
      expect(response.json()).toMatchObject({ code: "BAD_REQUEST" });
      return response.json().message as string;
    };
    expect(await refused("POST", base, { branch: { expires_at: "2030-07-15T18:02:16" } })).toMatch(
      /RFC 3339/,
    );
    expect(await refused("POST", base, { branch: { expires_at: "2030-02-30T00:00:00Z" } })).toMatch(
      /RFC 3339/,
    );
    expect(await refused("POST", base, { branch: { expires_at: inSeconds(-60) } })).toMatch(/future/);
    expect(await refused("POST", base, { branch: { expires_at: inSeconds(31 * 86_400) } })).toMatch(
      /30 days/,
    );
    expect(await refused("POST", base, { branch: { expires_at: 1_752_602_536 } })).toMatch(/expires_at/);

    // 2 hours ahead, written in Tokyo time
    const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2 * HOUR);
    const tokyo = new Date(at.getTime() + 9 * HOUR).toISOString().replace(".000Z", "+09:00");
    const branch = (await newBranch(projectId, { expires_at: tokyo })).branch;
    expect(branch.expires_at).toBe(at.toISOString());
    const url = `${base}/${branch.id}`;
    expect(await refused("PATCH", url, { branch: { expires_at: "next week" } })).toMatch(/RFC 3339/);
    const cleared = await h.call(key, "PATCH", url, { branch: { expires_at: null } });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json().branch).not.toHaveProperty("expires_at");
    const set = await h.call(key, "PATCH", url, { branch: { expires_at: inSeconds(600) } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json().branch.expires_at).toBeDefined();
  });

  it("refuses an expiry on the default branch, a protected branch or a parent, and children of an expiring branch (409)", async () => {
    const { projectId, mainId } = await newProject();
    const base = `/projects/${projectId}/branches`;
    const later = inSeconds(600);
    const conflict = async (method: string, url: string, body: object | undefined, pattern: RegExp) => {
      const response = await h.call(key, method, url, body);
      expect(response.statusCode, response.body).toBe(409);
      expect(response.json()).toMatchObject({ code: "CONFLICT", message: expect.stringMatching(pattern) });
    };
    await conflict("PATCH", `${base}/${mainId}`, { branch: { expires_at: later } }, /default branch/);

    const guarded = (await newBranch(projectId, { name: "guarded", protected: true })).branch;
    await conflict("PATCH", `${base}/${guarded.id}`, { branch: { expires_at: later } }, /protected/);
    const both = await h.call(key, "POST", base, { branch: { protected: true, expires_at: later } });
    expect(both.statusCode, both.body).toBe(400);

    const parent = (await newBranch(projectId, { name: "parent" })).branch;
    await newBranch(projectId, { name: "child", parent_id: parent.id });
    await conflict("PATCH", `${base}/${parent.id}`, { branch: { expires_at: later } }, /child branches/);

    const expiring = (await newBranch(projectId, { name: "expiring", expires_at: later })).branch;
    await conflict("POST", base, { branch: { parent_id: expiring.id } }, /cannot become a parent/);
    await conflict("PATCH", `${base}/${expiring.id}`, { branch: { protected: true } }, /protected/);
    await conflict("POST", `${base}/${expiring.id}/set_as_default`, undefined, /default branch/);
    // a rename of an expiring branch goes through
    expect(
      (await h.call(key, "PATCH", `${base}/${expiring.id}`, { branch: { name: "renamed" } })).statusCode,
    ).toBe(200);
  });

  it("never deletes the default branch or a parent: skips them and deletes the parent once its children are gone", async () => {
    const { projectId, mainId } = await newProject();
    const source = (await newBranch(projectId, { name: "source", expires_at: inSeconds(600) })).branch;
    const target = (await newBranch(projectId, { name: "target" })).branch;
    // A restore makes the target a child of its source: so an expiring branch can become a parent.
    const restored = await h.call(key, "POST", `/projects/${projectId}/branches/${target.id}/restore`, {
      source_branch_id: source.id,
    });
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json().branch.parent_id).toBe(source.id);
    await expireNow(source.id);
    await expireNow(mainId);

    const plane = await startPlane();
    try {
      expect(await plane.branchExpiry.sweep()).toEqual([]);
      expect(await branchStatus(projectId, source.id)).toBe(200);
      expect(await branchStatus(projectId, mainId)).toBe(200);

      expect((await h.call(key, "DELETE", `/projects/${projectId}/branches/${target.id}`)).statusCode).toBe(
        200,
      );
      expect(await plane.branchExpiry.sweep()).toEqual([{ projectId, branchId: source.id }]);
      expect(await branchStatus(projectId, source.id)).toBe(404);
      expect(await plane.branchExpiry.sweep()).toEqual([]);
      expect(await branchStatus(projectId, mainId)).toBe(200);
    } finally {
      await plane.stop();
    }
  });

  it("two processes sweeping at once delete each expired branch once", async () => {
    const expired: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { projectId } = await newProject();
      for (const name of ["a", "b"]) {
        const { branch } = await newBranch(projectId, { name, expires_at: inSeconds(600) });
        expired.push(branch.id);
      }
    }
    const [a, b] = [await startPlane(), await startPlane()];
    try {
      for (const branchId of expired) await expireNow(branchId);
      const deleted: string[] = [];
      await eventually(async () => {
        const swept = await Promise.all([a.branchExpiry.sweep(), b.branchExpiry.sweep()]);
        for (const branch of swept.flat()) deleted.push(branch.branchId);
        return deleted.length >= expired.length ? true : undefined;
      });
      expect(deleted.sort()).toEqual([...expired].sort());
      const { rows } = await h.meta.query(
        "SELECT branch_id, count(*)::int AS n FROM operations WHERE action = 'delete_timeline' AND branch_id = ANY($1) GROUP BY branch_id",
        [expired],
      );
      expect(rows).toHaveLength(expired.length);
      expect(rows.every((row) => row.n === 1)).toBe(true);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});
