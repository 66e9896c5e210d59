import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { quoteIdent, quoteLiteral } from "../../src/control/sql.js";
import { connectAs, physicalOf } from "./physical.js";
import { clusterUrlFor, type ManagementHarness, startManagement } from "./support.js";
import { loginOutcome, metadataDatabaseOf, newTenantProject } from "./tenants.js";

let h: ManagementHarness;
let key: string;
let admin: pg.Client;
beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  admin = new pg.Client({ connectionString: clusterUrlFor("postgres") });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  await h?.close();
});

const newProject = () => newTenantProject(h, key);
const metadataDatabase = () => metadataDatabaseOf(h);

it("an existing cluster is brought to this layout at start: comments go, PUBLIC's rights go, roles get random names and keep their passwords", async () => {
  const { projectId, branchId, rolePrefix } = await newProject();
  const before = await physicalOf(h, branchId);
  const legacyRole = `${rolePrefix}_neondb_owner`;
  const metadata = await metadataDatabase();
  // The layout as it was: a role named after the project's name for it, a commented database open to PUBLIC.
  await admin.query(`ALTER ROLE ${quoteIdent(before.role)} RENAME TO ${quoteIdent(legacyRole)}`);
  await h.meta.query("UPDATE project_roles SET physical_name = $2 WHERE project_id = $1", [
    projectId,
    legacyRole,
  ]);
  const comment = `pgtoll ${projectId}/${branchId}/neondb`;
  await admin.query(`COMMENT ON DATABASE ${quoteIdent(before.database)} IS ${quoteLiteral(comment)}`);
  await admin.query(`GRANT ALL ON DATABASE ${quoteIdent(before.database)} TO PUBLIC`);
  await admin.query(`GRANT CONNECT ON DATABASE ${quoteIdent(metadata)}, template1 TO PUBLIC`);
  // A second role whose rename on the cluster was cut short: the metadata has its new name already.
  const created = await h.call(key, "POST", `/projects/${projectId}/branches/${branchId}/roles`, {
    role: { name: "app" },
  });
  expect(created.statusCode, created.body).toBe(201);
  const app = await physicalOf(h, branchId, "neondb", "app");
  await admin.query(`ALTER ROLE ${quoteIdent(app.role)} RENAME TO ${quoteIdent(`${rolePrefix}_app`)}`);
  const other = await newProject();
  const outsider = await physicalOf(h, other.branchId);
  const outsiderRole = { name: outsider.role, password: outsider.password };
  expect(await loginOutcome(before.database, outsiderRole)).toBe("ok");
  expect(await loginOutcome(metadata, outsiderRole)).toBe("ok");

  const restarted = await h.startApp();
  try {
    const after = await physicalOf(h, branchId);
    expect(after.role).toMatch(/^pgtoll_role_[0-9a-f]{16}$/);
    expect(after.role).not.toBe(before.role);
    const { rows } = await admin.query(
      "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[]) ORDER BY rolname",
      [[legacyRole, `${rolePrefix}_app`, after.role, app.role]],
    );
    expect(rows.map((r) => r.rolname).sort()).toEqual([after.role, app.role].sort());
    const { rows: db } = await admin.query(
      "SELECT shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname = $1",
      [before.database],
    );
    expect(db[0].comment).toBeNull();
    expect(await loginOutcome(before.database, outsiderRole)).toBe("42501");
    expect(await loginOutcome(metadata, outsiderRole)).toBe("42501");
    expect(await loginOutcome("template1", outsiderRole)).toBe("42501");
    // The same passwords open the renamed roles: SCRAM verifiers do not depend on the name.
    expect(await loginOutcome(before.database, { name: after.role, password: before.password })).toBe("ok");
    expect(await loginOutcome(before.database, { name: app.role, password: app.password })).toBe("ok");
    const session = await connectAs(h, branchId);
    expect((await session.query("SELECT current_user AS u")).rows[0].u).toBe(after.role);
    await session.end();
  } finally {
    await restarted.close();
  }
});
