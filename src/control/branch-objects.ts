import type pg from "pg";
import { type ProjectAccess, projectFor } from "./access.js";
import { type Change, changeProject } from "./change.js";
import { getBranch } from "./lookups.js";
import type { OperationRow, PlannedOperation } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import type { BranchRow } from "./rows.js";
import type { Queryable } from "./sql.js";

/**
 * A change to one of a branch's objects: `changeProject`, with the branch locked and checked to be in the
 * project first (404 otherwise). Object lookups go by branch id alone, so without this check a caller could
 * reach another project's branch through the path of a project it may change.
 */
export function changeOnBranch<T>(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  work: (client: pg.PoolClient, access: ProjectAccess, branch: BranchRow) => Promise<Change<T>>,
) {
  return changeProject(plane, principal, projectId, async (client, access) =>
    work(client, access, await getBranch(client, projectId, branchId, true)),
  );
}

/** Where a deletion happens, for the work that forgets the object. */
export interface RemovalContext {
  plane: Plane;
  projectId: string;
  branchId: string;
}

/**
 * What every kind of per-branch object (databases, roles; `item` in answers) shares: reading them as
 * `principal` sees them (404 unless the caller sees the project and the branch is in it), and the frame of a
 * deletion. `all` and `one` read the branch's objects; `one` answers 404 for an unknown name.
 */
export function branchObjectKind<Row, Item extends string>(
  item: Item,
  all: (db: Queryable, branchId: string) => Promise<Row[]>,
  one: (db: Queryable, branchId: string, name: string) => Promise<Row>,
) {
  const visibleBranch = async (db: Queryable, principal: Principal, projectId: string, branchId: string) => {
    await projectFor(db, principal, projectId);
    await getBranch(db, projectId, branchId);
  };
  return {
    /** The branch's objects. */
    async list(db: Queryable, principal: Principal, projectId: string, branchId: string): Promise<Row[]> {
      await visibleBranch(db, principal, projectId, branchId);
      return all(db, branchId);
    },

    /** One of the branch's objects, by name. */
    async read(
      db: Queryable,
      principal: Principal,
      projectId: string,
      branchId: string,
      name: string,
    ): Promise<Row> {
      await visibleBranch(db, principal, projectId, branchId);
      return one(db, branchId, name);
    },

    /**
     * A deletion by name: in a change on the branch, finds the object and lets `work` forget it (it returns
     * the operations that finish the job on the cluster); answers `{[item]: object, operations}`.
     */
    removal(work: (client: pg.PoolClient, row: Row, at: RemovalContext) => Promise<PlannedOperation[]>) {
      return async (
        plane: Plane,
        principal: Principal,
        projectId: string,
        branchId: string,
        name: string,
      ): Promise<Record<Item, Row> & { operations: OperationRow[] }> => {
        const change = await changeOnBranch(plane, principal, projectId, branchId, async (client) => {
          const row = await one(client, branchId, name);
          return { result: row, planned: await work(client, row, { plane, projectId, branchId }) };
        });
        return { [item]: change.result, operations: change.operations } as Record<Item, Row> & {
          operations: OperationRow[];
        };
      };
    },
  };
}
