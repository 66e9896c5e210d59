import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectProjectCluster, type ProjectCluster } from "../../src/control/cluster.js";
import { forgetEndedSessions, recordEndpointSession } from "../../src/control/endpoint-session-records.js";
import { endEndpointSessions } from "../../src/control/endpoint-sessions.js";
import { admitEndpointSession, findEndpoint } from "../../src/proxy/endpoint-admission.js";
import type { EndpointRouting } from "../../src/proxy/proxy-context.js";
import type { TestProxy } from "../support/proxy.js";
import {
  type EndpointProject,
  expectAlive,
  expectEnded,
  newEndpointProject,
  renamedSession,
  startEndpointProxy,
} from "./endpoint-proxy-support.js";
import { connectAs, physicalOf } from "./physical.js";
import { clusterUrl, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let proxy: TestProxy;
let key: string;
let cluster: ProjectCluster;

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  proxy = await startEndpointProxy(h);
  cluster = connectProjectCluster(clusterUrl(), 2);
});
afterAll(async () => {
  await cluster?.close();
  await proxy?.close();
  await h?.close();
});

const recordsOf = async (endpointId: string) =>
  (await h.meta.query("SELECT id FROM endpoint_sessions WHERE endpoint_id = $1", [endpointId])).rows;

/** A backend on the branch's database as its role, recorded as the proxy records a session's. */
async function recordedBackend(project: EndpointProject, startUs?: string) {
  const client = await connectAs(h, project.branchId);
  const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
  const physical = await physicalOf(h, project.branchId);
  const facts = {
    endpointId: project.endpointId,
    projectId: project.projectId,
    branchId: project.branchId,
    physicalRole: physical.role,
    physicalDatabase: physical.database,
    clientAddress: "127.0.0.1",
    backendPid: pid,
  };
  if (startUs === undefined) await recordEndpointSession(h.meta, cluster.admin, facts);
  else
    await h.meta.query(
      `INSERT INTO endpoint_sessions (backend_pid, backend_start_us, endpoint_id, project_id, branch_id, physical_role,
         physical_database, client_addr) VALUES ($1, $2, $3, $4, $5, $6, $7, '127.0.0.1')`,
      [
        pid,
        startUs,
        project.endpointId,
        project.projectId,
        project.branchId,
        physical.role,
        physical.database,
      ],
    );
  return { client, pid };
}

describe("the record of an endpoint session's backend", () => {
  it("is written when a session starts through the proxy, and forgotten when it ends", async () => {
    const project = await newEndpointProject(h, key);
    const session = await renamedSession(proxy, project.endpointId, project.password);
    expect(await recordsOf(project.endpointId)).toHaveLength(1);
    await session.end();
    await expect.poll(() => recordsOf(project.endpointId)).toHaveLength(0);
  });

  it("ends only that backend: a later backend that got the same pid is never touched", async () => {
    const project = await newEndpointProject(h, key);
    // The pid of a live backend with another start time: what a reused pid looks like.
    const reused = await recordedBackend(project, "1");
    expect(await endEndpointSessions({ db: h.meta, cluster }, project.endpointId)).toBe(0);
    await expectAlive(reused.client);
    await reused.client.end();
  });

  it("is shared by every pgtoll process: another process's suspend ends the session", async () => {
    const project = await newEndpointProject(h, key);
    const session = await renamedSession(proxy, project.endpointId, project.password);
    const other = await h.startApp();
    const suspended = await other.app.inject({
      method: "POST",
      url: `/api/v2/projects/${project.projectId}/endpoints/${project.endpointId}/suspend`,
      headers: { authorization: `Bearer ${key}` },
    });
    expect(suspended.statusCode, suspended.body).toBe(200);
    await expectEnded(session);
    expect(await recordsOf(project.endpointId)).toHaveLength(0);
  });

  it("of a process that died is forgotten by the sweep once its backend has ended", async () => {
    const project = await newEndpointProject(h, key);
    const gone = await recordedBackend(project);
    const live = await recordedBackend(project);
    await gone.client.end();
    await expect
      .poll(
        async () =>
          (await cluster.admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [gone.pid])).rowCount,
      )
      .toBe(0);
    expect(await forgetEndedSessions(h.meta, cluster.admin)).toBeGreaterThanOrEqual(1);
    const left = await h.meta.query("SELECT backend_pid FROM endpoint_sessions WHERE endpoint_id = $1", [
      project.endpointId,
    ]);
    expect(left.rows).toEqual([{ backend_pid: live.pid }]);
    await live.client.end();
  });
});

describe("a session being admitted", () => {
  const routing = (): EndpointRouting => proxy.ctx.endpoints!;
  const ctx = () => ({ ...proxy.ctx, endpoints: routing() });
  const request = { endpointId: undefined, role: "neondb_owner", database: "neondb", settings: {} };

  /** The proxy's state right after its upstream session opened: the endpoint resolved, a backend up. */
  async function startedSession(project: EndpointProject) {
    const connection = await findEndpoint(request, project.endpointId, ctx(), "127.0.0.1");
    const backend = new pg.Client({ ...connection.upstream! });
    backend.on("error", () => {});
    await backend.connect();
    const pid = (await backend.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
    return { connection, backend, pid };
  }

  it("is let in and recorded while the endpoint still serves it", async () => {
    const project = await newEndpointProject(h, key);
    const started = await startedSession(project);
    const forget = await admitEndpointSession(request, started.connection, ctx(), "127.0.0.1", started.pid);
    expect(await recordsOf(project.endpointId)).toHaveLength(1);
    await forget();
    expect(await recordsOf(project.endpointId)).toHaveLength(0);
    await started.backend.end();
  });

  it("is refused, and not recorded, when access was taken away after the endpoint was first read", async () => {
    const project = await newEndpointProject(h, key);
    const base = `/projects/${project.projectId}`;
    const admit = (started: Awaited<ReturnType<typeof startedSession>>) =>
      admitEndpointSession(request, started.connection, ctx(), "127.0.0.1", started.pid);

    const beforeReset = await startedSession(project);
    await h.call(key, "POST", `${base}/branches/${project.branchId}/roles/neondb_owner/reset_password`);
    // The reset ended the backend itself: there is nothing left to record.
    await expect(admit(beforeReset)).rejects.toMatchObject({ sqlState: "57P01" });

    const password = (
      await h.call(key, "GET", `${base}/branches/${project.branchId}/roles/neondb_owner/reveal_password`)
    ).json().password;
    const beforeSuspend = await startedSession({ ...project, password });
    // As if the suspend had read the records just before this session's was written.
    await h.meta.query("UPDATE endpoints SET current_state = 'idle' WHERE id = $1", [project.endpointId]);
    await expect(admit(beforeSuspend)).rejects.toMatchObject({
      sqlState: "57P03",
      message: expect.stringMatching(/is suspended/),
    });
    await h.meta.query("UPDATE endpoints SET current_state = 'active' WHERE id = $1", [project.endpointId]);

    const beforeAllowlist = await startedSession({ ...project, password });
    await h.meta.query(
      `UPDATE projects SET settings = '{"allowed_ips": {"ips": ["198.51.100.5"]}}' WHERE id = $1`,
      [project.projectId],
    );
    await expect(admit(beforeAllowlist)).rejects.toMatchObject({ sqlState: "28000" });
    expect(await recordsOf(project.endpointId)).toHaveLength(0);
    for (const started of [beforeSuspend, beforeAllowlist]) await started.backend.end();
    await beforeReset.backend.end().catch(() => {});
  });
});
