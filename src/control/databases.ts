import { SqlState } from "../db/sql-state.js";
import { branchObjectKind, changeOnBranch } from "./branch-objects.js";
import { badRequest, conflict } from "./control-error.js";
import { queueDrops } from "./drop-queue.js";
import { newPhysicalDatabaseName } from "./ids.js";
import { databasesOf, getDatabase, getRole } from "./lookups.js";
import { checkDatabaseName } from "./names.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { retireUsage } from "./retire-usage.js";
import { type Queryable, sqlState } from "./sql.js";

const databases = branchObjectKind("database", databasesOf, getDatabase);

/** A branch's databases, and one of them by name, as the caller sees them. */
export const { list: listDatabases, read: readDatabase } = databases;

async function requireOwner(db: Queryable, branchId: string, ownerName: string) {
  const owner = await getRole(db, branchId, ownerName).catch(() => null);
  if (!owner) throw badRequest(`owner_name: role ${ownerName} does not exist on branch ${branchId}`);
}

/** Creates a real database on the branch, owned by one of the branch's roles. */
export async function createDatabase(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: { name: string; owner_name: string },
) {
  const name = checkDatabaseName(input.name);
  const change = await changeOnBranch(plane, principal, projectId, branchId, async (client) => {
    await requireOwner(client, branchId, input.owner_name);
    let id: number;
    try {
      const { rows } = await client.query(
        "INSERT INTO branch_databases (branch_id, name, owner_name, physical_name) VALUES ($1, $2, $3, $4) RETURNING id",
        [branchId, name, input.owner_name, newPhysicalDatabaseName()],
      );
      id = Number(rows[0].id);
    } catch (error) {
      if (sqlState(error) === SqlState.uniqueViolation)
        throw conflict(`database ${name} already exists on branch ${branchId}`);
      throw error;
    }
    return {
      result: id,
      planned: [{ action: "apply_config", branchId, step: { kind: "create_database", databaseId: id } }],
    };
  });
  return {
    database: await getDatabase(plane.db, branchId, name),
    operations: change.operations,
    id: change.result,
  };
}

/** Renames a database (its real name does not change) or gives it another owner among the branch's roles. */
export async function updateDatabase(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  name: string,
  input: { name?: string; owner_name?: string },
) {
  let finalName = name;
  const { operations } = await changeOnBranch(plane, principal, projectId, branchId, async (client) => {
    const database = await getDatabase(client, branchId, name);
    finalName = input.name === undefined ? name : checkDatabaseName(input.name);
    if (input.owner_name !== undefined) await requireOwner(client, branchId, input.owner_name);
    try {
      await client.query(
        "UPDATE branch_databases SET name = $2, owner_name = $3, updated_at = clock_timestamp() WHERE id = $1",
        [database.id, finalName, input.owner_name ?? database.ownerName],
      );
    } catch (error) {
      if (sqlState(error) === SqlState.uniqueViolation)
        throw conflict(`database ${finalName} already exists on branch ${branchId}`);
      throw error;
    }
    const ownerChanged = input.owner_name !== undefined && input.owner_name !== database.ownerName;
    return {
      result: undefined,
      planned: ownerChanged
        ? [
            {
              action: "apply_config",
              branchId,
              step: { kind: "set_database_owner", databaseId: database.id },
            },
          ]
        : [],
    };
  });
  return { database: await getDatabase(plane.db, branchId, finalName), operations };
}

/** Drops the database for real (its sessions are ended). */
export const deleteDatabase = databases.removal(async (client, database, { plane, projectId, branchId }) => {
  await retireUsage(client, plane.cluster, projectId, [database.physicalName]);
  await queueDrops(client, [{ kind: "database", physicalName: database.physicalName }]);
  await client.query("DELETE FROM branch_databases WHERE id = $1", [database.id]);
  return [{ action: "apply_config", branchId, step: { kind: "drop_queued" } }];
});
