import { ConsumptionHistoryGranularity, createApiClient } from "@neondatabase/api-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectProjectCluster, type ProjectCluster } from "../../src/control/cluster.js";
import { sampleConsumption } from "../../src/control/consumption.js";
import { query } from "./physical.js";
import { clusterUrl, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let api: ReturnType<typeof createApiClient>;
let key: string;
let orgId: string;
let cluster: ProjectCluster;

beforeAll(async () => {
  h = await startManagement();
  const account = await h.bootstrap("Metered Org");
  key = account.key;
  orgId = account.orgId!;
  const address = await h.app.listen({ host: "127.0.0.1", port: 0 });
  api = createApiClient({ apiKey: key, baseURL: `${address}/api/v2` });
  cluster = connectProjectCluster(clusterUrl());
});
afterAll(async () => {
  await cluster?.close();
  await h?.close();
});

const hour = 3_600_000;
const floorHour = (t: number) => new Date(Math.floor(t / hour) * hour);

describe("consumption history", () => {
  it("reports per timeframe the difference of the samples at its ends, for projects and for the account", async () => {
    const { data: a } = await api.createProject({ project: { name: "a", org_id: orgId } });
    const { data: b } = await api.createProject({ project: { name: "b", org_id: orgId } });
    const start = floorHour(Date.now() - 3 * hour);
    const at = (hours: number, minutes = 0) => new Date(start.getTime() + hours * hour + minutes * 60_000);
    // Cumulative counters as the sweep records them: a's grow in the first and third hour, b's in the second.
    await h.meta.query(
      `INSERT INTO consumption_samples (project_id, sampled_at, active_ms, session_ms, size_bytes) VALUES
         ($1, $3, 1000, 5000, 100), ($1, $4, 4000, 65000, 400), ($1, $5, 4000, 65000, 400), ($1, $6, 10000, 125000, 300),
         ($2, $3, 0, 0, 50), ($2, $5, 2000, 10000, 1050)`,
      [a.project.id, b.project.id, at(0, 1), at(0, 59), at(1, 30), at(2, 30)],
    );
    const { data } = await api.getConsumptionHistoryPerProject({
      from: start.toISOString(),
      to: at(3).toISOString(),
      granularity: ConsumptionHistoryGranularity.Hourly,
      project_ids: [a.project.id, b.project.id],
    });
    const byId = new Map(data.projects.map((p) => [p.project_id, p.periods[0]!.consumption]));
    expect(
      byId
        .get(a.project.id)!
        .map((f) => [
          f.compute_time_seconds,
          f.active_time_seconds,
          f.written_data_bytes,
          f.synthetic_storage_size_bytes,
        ]),
    ).toEqual([
      [4, 65, 400, 400],
      [0, 0, 0, 400],
      [6, 60, 0, 300],
    ]);
    expect(byId.get(b.project.id)!.map((f) => [f.compute_time_seconds, f.written_data_bytes])).toEqual([
      [0, 50],
      [2, 1000],
      [0, 0],
    ]);
    expect(byId.get(a.project.id)![0]).toMatchObject({
      timeframe_start: start.toISOString(),
      timeframe_end: at(1).toISOString(),
    });

    const account = await h.call(
      key,
      "GET",
      `/consumption_history/account?from=${start.toISOString()}&to=${at(3).toISOString()}&granularity=hourly&org_id=${orgId}`,
    );
    expect(account.statusCode).toBe(200);
    const frames = account.json().periods[0].consumption;
    expect(frames.map((f: { compute_time_seconds: number }) => f.compute_time_seconds)).toEqual([4, 2, 6]);
  });

  it("samples what the cluster measured for a project's databases: compute time, connected time, size", async () => {
    const { data: created } = await api.createProject({ project: { name: "busy", org_id: orgId } });
    await query(
      h,
      created.branch.id,
      "CREATE TABLE t AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g; SELECT pg_sleep(1.2)",
    );
    // Statistics are flushed when the session ends.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await sampleConsumption(h.meta, cluster);
    // Two hourly frames around now, summed: a sample taken just before an hour boundary still counts.
    const now = Date.now();
    const { data } = await api.getConsumptionHistoryPerProject({
      from: new Date(floorHour(now).getTime() - hour).toISOString(),
      to: new Date(floorHour(now).getTime() + hour).toISOString(),
      granularity: ConsumptionHistoryGranularity.Hourly,
      project_ids: [created.project.id],
    });
    const frames = data.projects[0]!.periods[0]!.consumption;
    const total = (field: "compute_time_seconds" | "active_time_seconds" | "written_data_bytes") =>
      frames.reduce((sum, frame) => sum + (frame[field] ?? 0), 0);
    expect(frames).toHaveLength(2);
    expect(total("compute_time_seconds")).toBeGreaterThanOrEqual(1);
    expect(total("active_time_seconds")).toBeGreaterThanOrEqual(1);
    const size = frames[1]!.synthetic_storage_size_bytes;
    expect(size).toBeGreaterThan(4_000_000);
    expect(total("written_data_bytes")).toBe(size);
  });

  it("refuses a bad window as Neon does", async () => {
    const call = (q: string) => h.call(key, "GET", `/consumption_history/projects?${q}`);
    const now = new Date().toISOString();
    expect((await call(`from=${now}&to=${now}&granularity=hourly`)).json().message).toMatch(
      /from must be before to/,
    );
    expect((await call(`from=2020-01-01T00:00:00Z&to=${now}&granularity=hourly`)).json().message).toMatch(
      /168 hours/,
    );
    expect((await call(`from=x&to=${now}&granularity=daily`)).statusCode).toBe(400);
    expect((await call(`from=${now}&to=${now}&granularity=weekly`)).json().message).toMatch(
      /granularity must be/,
    );
    expect((await call(`to=${now}&granularity=daily`)).statusCode).toBe(400);
  });
});
