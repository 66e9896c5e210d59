import { checkCopy } from "./copy-rule.js";
import { checkRelationRead, checkShow } from "./sensitive-reads.js";
import { checkSetting } from "./settings-rule.js";
import type { Denial, GuardPolicy } from "./types.js";
import { targetNameOf, whereRestrictsTarget } from "./where-restriction.js";
import { checkExplain } from "./write-placement.js";

/**
 * The statement allowlist. Called for every statement node of the tree, top level or nested (CTE,
 * subquery, EXPLAIN, PREPARE, DECLARE, COPY); the walker checks the nested nodes and function calls.
 * Any statement kind not named here is denied.
 */
export function checkStatement(
  kind: string,
  body: Record<string, unknown>,
  policy: GuardPolicy,
): Denial | null {
  switch (kind) {
    case "SelectStmt": // SELECT INTO is caught by the walker (its intoClause can sit in a UNION branch)
    case "PrepareStmt": // so is the prepared one
    case "DeclareCursorStmt": // and the cursor's query
    case "ExecuteStmt": // runs a body checked at PREPARE (the proxy must guard protocol-level Parse too)
    case "DeallocateStmt":
    case "FetchStmt":
    case "ClosePortalStmt":
    case "ConstraintsSetStmt":
    case "UnlistenStmt": // only ends this session's own listening; LISTEN itself is denied
      return null;
    case "ExplainStmt": // the explained statement is a nested node
      return checkExplain(body);
    case "VariableShowStmt":
      return checkShow(body);
    case "InsertStmt":
      return checkWriteTarget(body.relation);
    case "UpdateStmt":
      return checkWriteTarget(body.relation) ?? checkBounded("UPDATE", body);
    case "DeleteStmt":
      return checkWriteTarget(body.relation) ?? checkBounded("DELETE", body);
    case "VariableSetStmt":
      return checkSetting(body, policy);
    case "TransactionStmt":
      return checkTransaction(body);
    case "CopyStmt": // its relation is inlined, not a RangeVar node the walker would see
      return checkRelationRead(body.relation) ?? checkCopy(body, policy);
    default:
      return denyKind(kind);
  }
}

function checkBounded(command: "UPDATE" | "DELETE", body: Record<string, unknown>): Denial | null {
  const target = targetNameOf(body.relation);
  if (body.whereClause !== undefined && whereRestrictsTarget(body.whereClause, target)) return null;
  return {
    rule: command === "UPDATE" ? "unbounded-update" : "unbounded-delete",
    message: `${command} needs a WHERE clause that restricts the rows of "${target}" (it references none of its columns)`,
  };
}

const SYSTEM_SCHEMAS = new Set(["pg_catalog", "information_schema", "pg_toast"]);

/** Writes to catalogs are denied: `UPDATE pg_settings` is `set_config` in disguise. */
function checkWriteTarget(relation: unknown): Denial | null {
  if (typeof relation !== "object" || relation === null) return null;
  const { schemaname, relname } = relation as { schemaname?: unknown; relname?: unknown };
  const system =
    (typeof schemaname === "string" && SYSTEM_SCHEMAS.has(schemaname)) ||
    (typeof relname === "string" && relname.startsWith("pg_"));
  if (!system) return null;
  return {
    rule: "system-catalog-write",
    message: `writing to system relation "${String(relname)}" is not allowed`,
  };
}

/** Two-phase commit leaves a transaction holding locks after the session is gone. */
function checkTransaction(body: Record<string, unknown>): Denial | null {
  const kind = body.kind;
  if (
    kind === "TRANS_STMT_PREPARE" ||
    kind === "TRANS_STMT_COMMIT_PREPARED" ||
    kind === "TRANS_STMT_ROLLBACK_PREPARED"
  ) {
    return {
      rule: "no-two-phase-commit",
      message: "PREPARE TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED are not allowed",
    };
  }
  return null;
}

/** Rule ids for denied statement kinds, by parse node name. */
const KIND_RULES: Record<string, [rule: string, what: string]> = {
  TruncateStmt: ["no-truncate", "TRUNCATE"],
  MergeStmt: ["no-merge", "MERGE"],
  DoStmt: ["no-do", "DO"],
  CallStmt: ["no-call", "CALL"],
  LockStmt: ["no-lock", "LOCK"],
  VacuumStmt: ["no-maintenance", "VACUUM and ANALYZE"],
  ReindexStmt: ["no-maintenance", "REINDEX"],
  ClusterStmt: ["no-maintenance", "CLUSTER"],
  CheckPointStmt: ["no-maintenance", "CHECKPOINT"],
  RefreshMatViewStmt: ["no-maintenance", "REFRESH MATERIALIZED VIEW"],
  LoadStmt: ["no-load", "LOAD"],
  AlterSystemStmt: ["no-alter-system", "ALTER SYSTEM"],
  NotifyStmt: ["no-notify", "NOTIFY"],
  ListenStmt: ["no-listen", "LISTEN"],
  DiscardStmt: ["no-discard", "DISCARD"],
  CreateTableAsStmt: ["no-ddl", "CREATE TABLE AS / CREATE MATERIALIZED VIEW"],
};

const DDL_PREFIXES = [
  "Create",
  "Alter",
  "Define",
  "Rename",
  "Grant",
  "Comment",
  "SecLabel",
  "Reassign",
  "Import",
];
const DDL_KINDS = new Set(["IndexStmt", "ViewStmt", "RuleStmt", "CompositeTypeStmt"]);

function denyKind(kind: string): Denial {
  const known = KIND_RULES[kind];
  if (known) return { rule: known[0], message: `${known[1]} is not allowed` };
  if (kind.startsWith("Drop")) return { rule: "no-drop", message: "DROP is not allowed" };
  if (DDL_KINDS.has(kind) || DDL_PREFIXES.some((p) => kind.startsWith(p))) {
    return { rule: "no-ddl", message: `schema, role and privilege changes are not allowed (${kind})` };
  }
  return { rule: "statement-not-allowed", message: `statement ${kind} is not allowed` };
}
