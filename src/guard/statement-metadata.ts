import type { GuardedStatement } from "./types.js";
import { isFalseOption } from "./write-placement.js";

const TRANSACTION_TAGS: Record<string, string> = {
  TRANS_STMT_BEGIN: "BEGIN",
  TRANS_STMT_START: "START TRANSACTION",
  TRANS_STMT_COMMIT: "COMMIT",
  TRANS_STMT_ROLLBACK: "ROLLBACK",
  TRANS_STMT_SAVEPOINT: "SAVEPOINT",
  TRANS_STMT_RELEASE: "RELEASE",
  TRANS_STMT_ROLLBACK_TO: "ROLLBACK",
  TRANS_STMT_PREPARE: "PREPARE TRANSACTION",
  TRANS_STMT_COMMIT_PREPARED: "COMMIT PREPARED",
  TRANS_STMT_ROLLBACK_PREPARED: "ROLLBACK PREPARED",
};

type Metadata = Omit<GuardedStatement, "sql">;

/** Settings under this prefix belong to pgtoll, not to the provider's database. */
const PGTOLL_SETTING_PREFIX = "pgtoll.";

/** The value of `SET name = value` as PostgreSQL would read it (a string, a number or a word), else "". */
function settingValue(args: unknown): string {
  const first = (Array.isArray(args) ? args[0] : undefined) as
    | { A_Const?: { sval?: { sval?: string }; fval?: { fval?: string }; ival?: { ival?: number } } }
    | undefined;
  const constant = first?.A_Const;
  if (!constant) return "";
  if (constant.sval) return constant.sval.sval ?? "";
  if (constant.fval) return constant.fval.fval ?? "";
  if (constant.ival) return String(constant.ival.ival ?? 0);
  return "";
}

/** Command tag and capabilities of an allowed top-level statement, from its parse node. */
export function describeStatement(kind: string, body: Record<string, unknown>): Metadata {
  switch (kind) {
    case "SelectStmt": // VALUES and TABLE are SelectStmts too, and PostgreSQL tags them SELECT
      return meta("SELECT", { explainable: true, returnsRows: true });
    case "InsertStmt":
    case "UpdateStmt":
    case "DeleteStmt":
    case "MergeStmt":
      return meta(kind.slice(0, -4).toUpperCase(), {
        explainable: true,
        returnsRows: body.returningClause !== undefined || body.returningList !== undefined,
        writes: true,
      });
    case "ExplainStmt":
      return meta("EXPLAIN", { returnsRows: true });
    case "VariableShowStmt": {
      const name = typeof body.name === "string" ? body.name.toLowerCase() : "";
      const shown = meta("SHOW", { returnsRows: true });
      return name.startsWith(PGTOLL_SETTING_PREFIX) ? { ...shown, pgtollSetting: name } : shown;
    }
    case "VariableSetStmt": {
      const reset = body.kind === "VAR_RESET" || body.kind === "VAR_RESET_ALL";
      const set = meta(reset ? "RESET" : "SET", {});
      const name = typeof body.name === "string" ? body.name.toLowerCase() : "";
      if (!name.startsWith(PGTOLL_SETTING_PREFIX)) return set;
      return {
        ...set,
        pgtollSetting: name,
        pgtollValue: body.kind === "VAR_SET_VALUE" ? settingValue(body.args) : null,
      };
    }
    case "TransactionStmt":
      return meta(TRANSACTION_TAGS[String(body.kind)] ?? "BEGIN", { transactionControl: true });
    case "PrepareStmt":
      return meta("PREPARE", {});
    case "ExecuteStmt":
      return meta("EXECUTE", { explainable: true, returnsRows: true, writes: true });
    case "DeallocateStmt":
      return meta(body.isall === true ? "DEALLOCATE ALL" : "DEALLOCATE", {});
    case "DeclareCursorStmt":
      return meta("DECLARE CURSOR", { explainable: true });
    case "FetchStmt":
      return body.ismove === true ? meta("MOVE", {}) : meta("FETCH", { returnsRows: true });
    case "ClosePortalStmt":
      return meta(body.portalname === undefined ? "CLOSE CURSOR ALL" : "CLOSE CURSOR", {});
    case "CopyStmt": {
      const copy = meta("COPY", { returnsRows: body.is_from !== true });
      return hasHeaderLine(body.options) ? { ...copy, copyHeader: true } : copy;
    }
    case "ConstraintsSetStmt":
      return meta("SET CONSTRAINTS", {});
    case "UnlistenStmt":
      return meta("UNLISTEN", {});
    default:
      // Only reached by policies that allow more kinds than the standard allowlist.
      return meta(kind.replace(/Stmt$/, "").toUpperCase(), {});
  }
}

function meta(command: string, flags: Partial<Omit<Metadata, "command">>): Metadata {
  return {
    command,
    explainable: flags.explainable ?? false,
    returnsRows: flags.returnsRows ?? false,
    transactionControl: flags.transactionControl ?? false,
    writes: flags.writes ?? false,
  };
}

/**
 * Whether a COPY's options ask for a header line in text or CSV (binary has none). A value PostgreSQL might read
 * as true counts as true: the header is then not charged as a row, so a doubt is in the agent's favour.
 */
function hasHeaderLine(options: unknown): boolean {
  if (!Array.isArray(options)) return false;
  let header = false;
  let binary = false;
  for (const option of options) {
    const def = (option as { DefElem?: { defname?: unknown; arg?: unknown } }).DefElem;
    if (def?.defname === "header") header = !isFalseOption(def.arg);
    if (def?.defname === "format")
      binary = (def.arg as { String?: { sval?: string } })?.String?.sval === "binary";
  }
  return header && !binary;
}
