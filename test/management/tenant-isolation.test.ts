import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectProjectCluster } from "../../src/control/cluster.js";
import {
  copyPhysicalDatabase,
  dropPhysicalDatabase,
  restrictConnections,
} from "../../src/control/physical-databases.js";
import { quoteIdent } from "../../src/control/sql.js";
import { startEndpointProxy } from "./endpoint-proxy-support.js";
import { connectAs, physicalOf } from "./physical.js";
import { clusterUrl, type ManagementHarness, startManagement } from "./support.js";
import { loginOutcome, metadataDatabaseOf, newTenantProject } from "./tenants.js";

let h: ManagementHarness;
let key: string;
beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
});
afterAll(async () => {
  await h?.close();
});

const newProject = (branch: object = {}) => newTenantProject(h, key, branch);
const metadataDatabase = () => metadataDatabaseOf(h);

describe("what a project's role sees of the other tenants on the cluster", () => {
  it("no other project's id, branch id, database name, role name or role prefix, in any shared catalog", async () => {
    const mine = await newProject();
    const other = await newProject({ database_name: "customer_pii", role_name: "pii_reader" });
    const child = await h.call(key, "POST", `/projects/${other.projectId}/branches`, {
      branch: { name: "staging" },
    });
    expect(child.statusCode, child.body).toBe(201);
    const otherBranch = child.json().branch.id as string;
    const db = await h.call(key, "POST", `/projects/${other.projectId}/branches/${otherBranch}/databases`, {
      database: { name: "payroll_2024", owner_name: "pii_reader" },
    });
    expect(db.statusCode, db.body).toBe(201);

    const session = await connectAs(h, mine.branchId);
    try {
      // Everything a role can read about the cluster's databases, roles and their comments.
      const { rows } = await session.query(
        `SELECT 'db' AS kind, datname::text AS name, pg_get_userbyid(datdba)::text AS owner, datacl::text AS acl,
                shobj_description(oid, 'pg_database') AS comment FROM pg_database
         UNION ALL SELECT 'role', rolname::text, NULL, NULL, shobj_description(oid, 'pg_authid') FROM pg_roles
         UNION ALL SELECT 'member', roleid::regrole::text, member::regrole::text, NULL, NULL FROM pg_auth_members
         UNION ALL SELECT 'comment', objoid::text, classoid::regclass::text, NULL, description FROM pg_shdescription
         UNION ALL SELECT 'setting', setdatabase::text, setrole::text, setconfig::text, NULL FROM pg_db_role_setting`,
      );
      const seen = JSON.stringify(rows);
      for (const secret of [
        other.projectId,
        other.branchId,
        otherBranch,
        other.rolePrefix,
        "customer_pii",
        "pii_reader",
        "payroll_2024",
        "staging",
        "neondb_owner",
        mine.projectId,
      ])
        expect(seen).not.toContain(secret);
      // What it can still learn: the databases and roles exist, under opaque names.
      const { rows: names } = await session.query(
        "SELECT datname FROM pg_database WHERE datname LIKE 'pgtoll\\_db\\_%'",
      );
      expect(names.length).toBeGreaterThanOrEqual(4);
      expect(names.every((row) => /^pgtoll_db_[0-9a-f]{16}$/.test(row.datname))).toBe(true);
      const current = (await session.query("SELECT current_user AS u")).rows[0].u;
      expect(current).toMatch(/^pgtoll_role_[0-9a-f]{16}$/);
    } finally {
      await session.end();
    }
  });

  it("the API says each role's name inside PostgreSQL, so the project can GRANT to it", async () => {
    const { projectId, branchId } = await newProject();
    const base = `/projects/${projectId}/branches/${branchId}/roles`;
    const created = (await h.call(key, "POST", base, { role: { name: "readers", no_login: true } })).json();
    const postgresName = created.role.postgres_name as string;
    expect(postgresName).toMatch(/^pgtoll_role_[0-9a-f]{16}$/);
    expect((await h.call(key, "GET", `${base}/readers`)).json().role.postgres_name).toBe(postgresName);
    const owner = await connectAs(h, branchId);
    try {
      await owner.query("CREATE TABLE t (x int)");
      await owner.query(`GRANT SELECT ON t TO ${quoteIdent(postgresName)}`);
      const { rows } = await owner.query(
        "SELECT grantee FROM information_schema.role_table_grants WHERE table_name = 't' AND grantee <> current_user",
      );
      expect(rows).toEqual([{ grantee: postgresName }]);
    } finally {
      await owner.end();
    }
  });

  it("a project's role cannot connect to another project's database, template1, or pgtoll's metadata database", async () => {
    const mine = await newProject();
    const other = await newProject();
    const me = await physicalOf(h, mine.branchId);
    const theirs = await physicalOf(h, other.branchId);
    const role = { name: me.role, password: me.password };
    expect(await loginOutcome(me.database, role)).toBe("ok");
    expect(await loginOutcome(theirs.database, role)).toBe("42501");
    expect(await loginOutcome("template1", role)).toBe("42501");
    expect(await loginOutcome(await metadataDatabase(), role)).toBe("42501");
  });
});

describe("a branch copy", () => {
  it("is closed to every connection until PUBLIC has lost its rights on it", async () => {
    const { branchId } = await newProject();
    const outsider = await physicalOf(h, (await newProject()).branchId);
    const source = await physicalOf(h, branchId);
    const cluster = connectProjectCluster(clusterUrl());
    const copy = `pgtoll_db_${randomBytes(8).toString("hex")}`;
    try {
      await copyPhysicalDatabase(cluster, source.database, copy, source.role);
      // the instant after CREATE DATABASE: nobody gets in, not even with PUBLIC's default rights
      expect(await loginOutcome(copy, { name: outsider.role, password: outsider.password })).toBe("55000");
      await restrictConnections(cluster, copy, [source.role]);
      expect(await loginOutcome(copy, { name: outsider.role, password: outsider.password })).toBe("42501");
      expect(await loginOutcome(copy, { name: source.role, password: source.password })).toBe("ok");
    } finally {
      await dropPhysicalDatabase(cluster, copy);
      await cluster.close();
    }
  });
});

describe("what an endpoint session sees of the other tenants' sessions", () => {
  it("pg_stat_activity names no other endpoint, project or database of the API", async () => {
    const proxy = await startEndpointProxy(h);
    const endpointSession = async () => {
      const created = (await h.call(key, "POST", "/projects", { project: {} })).json();
      const uri = new URL(created.connection_uris[0].connection_uri);
      const client = new pg.Client({
        host: "127.0.0.1",
        port: proxy.port,
        user: "neondb_owner",
        database: "neondb",
        password: decodeURIComponent(uri.password),
        options: `endpoint=${created.endpoints[0].id}`,
      });
      await client.connect();
      return {
        client,
        endpointId: created.endpoints[0].id as string,
        projectId: created.project.id as string,
      };
    };
    const mine = await endpointSession();
    const other = await endpointSession();
    try {
      const { rows } = await mine.client.query(
        "SELECT usename, datname, application_name FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
      );
      const seen = JSON.stringify(rows);
      // The other session is there, under the name its client chose (none here), with nothing of the API.
      expect(rows.length).toBeGreaterThan(0);
      for (const secret of [other.endpointId, other.projectId, "neondb_owner", '"neondb"'])
        expect(seen).not.toContain(secret);
    } finally {
      await mine.client.end();
      await other.client.end();
      await proxy.close();
    }
  });
});
