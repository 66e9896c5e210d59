import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBranch } from "../../src/control/branch-create.js";
import { ControlPlane } from "../../src/control/control-plane.js";
import { getOperation } from "../../src/control/operations.js";
import type { Principal } from "../../src/control/principal.js";
import { physicalOf, query } from "./physical.js";
import { clusterUrl, clusterUrlFor, eventually, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
let userId: string;
beforeAll(async () => {
  // Changes answer at once (no waiting for operations); a copy waits up to 3 s for open transactions.
  h = await startManagement({ settings: { operationWaitMs: 0, fenceGraceMs: 3000 } });
  ({ key, userId } = await h.bootstrap());
});
afterAll(async () => {
  await h?.close();
});

async function settledProject() {
  const body = (await h.call(key, "POST", "/projects", { project: { name: "ops" } })).json();
  const projectId = body.project.id as string;
  for (const op of body.operations) await waitFinished(projectId, op.id);
  return { projectId, mainId: body.branch.id as string };
}

async function waitFinished(projectId: string, operationId: string) {
  return eventually(
    async () => {
      const { operation } = (
        await h.call(key, "GET", `/projects/${projectId}/operations/${operationId}`)
      ).json();
      if (operation.status === "failed") throw new Error(`operation failed: ${operation.error}`);
      return operation.status === "finished" ? operation : undefined;
    },
    20_000,
    `operation ${operationId}`,
  );
}

/** A session on the branch's database inside an open transaction: a branch copy waits for it. */
async function openTransaction(branchId: string): Promise<pg.Client> {
  const parent = await physicalOf(h, branchId);
  const client = new pg.Client({
    connectionString: clusterUrlFor(parent.database, { name: parent.role, password: parent.password }),
  });
  client.on("error", () => {});
  await client.connect();
  await client.query("BEGIN");
  await client.query("SELECT 1");
  return client;
}

describe("operations", () => {
  it("are returned by every change, move scheduling/running -> finished, and can be polled and listed", async () => {
    const created = (await h.call(key, "POST", "/projects", { project: { name: "polled" } })).json();
    expect(created.operations.map((op: { action: string }) => op.action)).toEqual([
      "create_timeline",
      "start_compute",
    ]);
    for (const op of created.operations) {
      expect(["scheduling", "running", "finished"]).toContain(op.status);
      expect(op).toMatchObject({
        project_id: created.project.id,
        failures_count: 0,
        total_duration_ms: expect.any(Number),
      });
    }
    const finished = await waitFinished(created.project.id, created.operations[1].id);
    expect(finished).toMatchObject({
      action: "start_compute",
      endpoint_id: created.endpoints[0].id,
      branch_id: created.branch.id,
    });

    const roles = await h.call(
      key,
      "POST",
      `/projects/${created.project.id}/branches/${created.branch.id}/roles`,
      { role: { name: "r" } },
    );
    await waitFinished(created.project.id, roles.json().operations[0].id);
    const first = (await h.call(key, "GET", `/projects/${created.project.id}/operations?limit=2`)).json();
    expect(first.operations.map((op: { action: string }) => op.action)).toEqual([
      "apply_config",
      "start_compute",
    ]);
    const rest = (
      await h.call(
        key,
        "GET",
        `/projects/${created.project.id}/operations?limit=2&cursor=${first.pagination.cursor}`,
      )
    ).json();
    expect(rest.operations.map((op: { action: string }) => op.action)).toEqual(["create_timeline"]);
    expect(
      (
        await h.call(
          key,
          "GET",
          `/projects/${created.project.id}/operations/00000000-0000-0000-0000-000000000000`,
        )
      ).statusCode,
    ).toBe(404);
  });

  it("a conflicting change while operations run gets 423 Locked; the project shows locked; it goes through after", async () => {
    const { projectId, mainId } = await settledProject();
    const blocker = await openTransaction(mainId);
    const branching = (
      await h.call(key, "POST", `/projects/${projectId}/branches`, { branch: { name: "slow" } })
    ).json();
    const operationId = branching.operations[0].id;
    await eventually(async () =>
      (await getOperation(h.meta, projectId, operationId)).status === "running" ? true : undefined,
    );

    const conflicting = await h.call(key, "POST", `/projects/${projectId}/branches`, {
      branch: { name: "second" },
    });
    expect(conflicting.statusCode).toBe(423);
    expect(conflicting.json()).toMatchObject({
      code: "LOCKED",
      message: expect.stringMatching(/operations in progress/),
    });
    expect(
      (await h.call(key, "POST", `/projects/${projectId}/branches/${mainId}/roles`, { role: { name: "x" } }))
        .statusCode,
    ).toBe(423);
    expect((await h.call(key, "DELETE", `/projects/${projectId}`)).statusCode).toBe(423);
    expect((await h.call(key, "GET", `/projects/${projectId}`)).json().project.locked).toBe(true);
    // reads still work
    expect((await h.call(key, "GET", `/projects/${projectId}/branches`)).statusCode).toBe(200);

    await blocker.query("COMMIT");
    await waitFinished(projectId, operationId);
    await blocker.end().catch(() => {});
    expect((await h.call(key, "GET", `/projects/${projectId}`)).json().project.locked).toBe(false);
    expect(
      (await h.call(key, "POST", `/projects/${projectId}/branches`, { branch: { name: "second" } }))
        .statusCode,
    ).toBe(201);
  });

  it("survive the death of the process running them: another takes them over and none is left running", async () => {
    const { projectId, mainId } = await settledProject();
    await query(h, mainId, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)");
    const settings = { ...h.settings, operationWaitMs: 0, fenceGraceMs: 60_000 };
    const logger = pino({ level: "silent" });
    const { rows: keys } = await h.meta.query("SELECT id FROM api_keys WHERE user_id = $1", [userId]);
    const keyId = Number(keys[0].id);
    const principal: Principal = { kind: "personal", keyId, userId, accountId: userId };

    // process A schedules a branch copy that waits on an open transaction of the parent, then dies
    const a = await ControlPlane.start(h.meta, h.box, settings, logger);
    const blocker = await openTransaction(mainId);
    const { branch, operations } = await createBranch(a, principal, projectId, {
      branch: { name: "survivor" },
    });
    await eventually(async () =>
      (await getOperation(h.meta, projectId, operations[0]!.id)).status === "running" ? true : undefined,
    );
    const parent = await physicalOf(h, mainId);
    const admin = new pg.Client({ connectionString: clusterUrl() });
    await admin.connect();
    const allowsConnections = async () =>
      (await admin.query("SELECT datallowconn FROM pg_database WHERE datname = $1", [parent.database]))
        .rows[0].datallowconn as boolean;
    // The operation is running once its fence is up: new connections to the parent are refused.
    await eventually(async () => ((await allowsConnections()) ? undefined : true));
    await a.stop({ abandon: true });
    const orphan = await getOperation(h.meta, projectId, operations[0]!.id);
    expect(orphan.status).toBe("running");
    expect(await allowsConnections()).toBe(false);

    // process B starts: it takes the operation over at once and runs it again from the start
    await blocker.query("COMMIT");
    await blocker.end().catch(() => {});
    const b = await ControlPlane.start(h.meta, h.box, { ...settings, fenceGraceMs: 1000 }, logger);
    try {
      const done = await eventually(async () => {
        const op = await getOperation(h.meta, projectId, operations[0]!.id);
        return op.status === "finished" || op.status === "failed" ? op : undefined;
      });
      expect(done).toMatchObject({ status: "finished", failuresCount: 1 });
      const { rowCount } = await h.meta.query(
        "SELECT 1 FROM operations WHERE status IN ('scheduling', 'running')",
      );
      expect(rowCount).toBe(0);
      expect(
        (await h.call(key, "GET", `/projects/${projectId}/branches/${branch.id}`)).json().branch
          .current_state,
      ).toBe("ready");
      expect(await query(h, branch.id, "SELECT v FROM kept")).toEqual([{ v: 1 }]);
      expect(await allowsConnections()).toBe(true);
    } finally {
      await b.stop();
      await admin.end();
    }
  }, 60_000);
});
