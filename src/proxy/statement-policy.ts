import { INVALID_SQL_RULE, type RefusalKind } from "../analytics/refusal-tally.js";
import { SqlState } from "../db/sql-state.js";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import type { TransactionStatus } from "./backend-messages.js";
import type { SessionSettings } from "./in-band-settings.js";
import type { PreparedStatement } from "./prepared-statements.js";
import { errorFrame } from "./proxy-errors.js";
import type { ProxyTally } from "./proxy-metrics.js";
import { planWrites, type WritePlan } from "./write-transactions.js";

/** How the relay runs a Query message. */
export type QueryPlan =
  /** Not run: the client gets `error` in its place (the upstream gets a stand-in that fails). */
  | { kind: "refused"; error: Buffer }
  /** `SHOW pgtoll.<name>`, a query of its own: the proxy answers it (in-band-settings.ts). */
  | { kind: "setting"; name: string }
  /** `SET` or `RESET` (`value` null) of `pgtoll.<name>`, a query of its own: the proxy applies it. */
  | { kind: "set"; name: string; value: string | null; command: string; statementCount: number }
  /** It writes: it runs so that its writes commit only once paid for, as `writePlan` says. */
  | { kind: "write"; statements: readonly GuardedStatement[] }
  /** Nothing of it writes. `free`: only ROLLBACKs (no data, and the way out), sent even when nothing is funded. */
  | { kind: "read"; statements: readonly GuardedStatement[]; free: boolean };

/**
 * What each client message that carries SQL may do: the guard's verdict on its text, and the proxy's own rules
 * about what it cannot meter. Refusals are counted here. The relay asks; it never reads a verdict itself.
 */
export interface StatementPolicy {
  query(sql: string): QueryPlan;
  /** A Parse of `sql`: what the relay keeps of the statement for its Bind and Execute, or its refusal. */
  parse(sql: string): PreparedStatement | Buffer;
  /** How a query that writes runs, asked once everything before it is answered (so `status` is known). */
  writePlan(statements: readonly GuardedStatement[], status: TransactionStatus): WritePlan;
  /** The refusal of every FunctionCall message: it runs a function by its OID, with no SQL to check. */
  readonly functionCallRefusal: Buffer;
  /** The statement `sql` runs (its first), as the guard read it: how its result is framed (a COPY's header line). */
  statementOf(sql: string): GuardedStatement | undefined;
}

export interface StatementPolicyOptions {
  /** The guard, memoised by SQL text. */
  check(sql: string): GuardVerdict;
  settings: SessionSettings;
  /** Verdicts are counted in it. */
  tally: ProxyTally;
  /** Counts a refused statement of this session's provider (analytics/refusal-tally.ts). */
  countRefusal(kind: RefusalKind, rule: string): void;
}

/** The guard's policy, for one session. */
export function statementPolicy(options: StatementPolicyOptions): StatementPolicy {
  return new GuardedPolicy(options);
}

const FUNCTION_CALL_REFUSAL = errorFrame(
  SqlState.featureNotSupported,
  "the FunctionCall message is not supported by pgtoll; call the function in a query",
);

class GuardedPolicy implements StatementPolicy {
  readonly functionCallRefusal = FUNCTION_CALL_REFUSAL;

  constructor(private readonly options: StatementPolicyOptions) {}

  query(sql: string): QueryPlan {
    const verdict = this.#judge(sql);
    if (verdict.kind !== "allow") return { kind: "refused", error: this.#refuse(verdict) };
    const { statements } = verdict;
    const setting = settingOf(statements);
    if (setting?.pgtollValue !== undefined)
      return {
        kind: "set",
        name: setting.pgtollSetting!,
        value: setting.pgtollValue,
        command: setting.command,
        statementCount: statements.length,
      };
    if (setting !== undefined) {
      const name = setting.pgtollSetting!;
      const refusal = this.options.settings.refusal(name, statements.length);
      return refusal ? { kind: "refused", error: refusal } : { kind: "setting", name };
    }
    if (statements.some(isWrite)) return { kind: "write", statements };
    return { kind: "read", statements, free: statements.every(isRollback) };
  }

  parse(sql: string): PreparedStatement | Buffer {
    const verdict = this.#judge(sql);
    if (verdict.kind !== "allow") return this.#refuse(verdict);
    const statement = settingOf(verdict.statements);
    if (statement === undefined) return { sql, writes: verdict.statements.some(isWrite) };
    const setting = statement.pgtollSetting!;
    if (statement.pgtollValue !== undefined)
      return errorFrame(
        SqlState.featureNotSupported,
        `${statement.command} ${setting} must be sent as a simple query (not prepared)`,
      );
    return (
      this.options.settings.refusal(setting, verdict.statements.length) ?? { sql, writes: false, setting }
    );
  }

  writePlan(statements: readonly GuardedStatement[], status: TransactionStatus): WritePlan {
    return planWrites(statements, status);
  }

  statementOf(sql: string): GuardedStatement | undefined {
    const verdict = this.options.check(sql);
    return verdict.kind === "allow" ? verdict.statements[0] : undefined;
  }

  #judge(sql: string): GuardVerdict {
    const verdict = this.options.check(sql);
    this.options.tally.verdicts[verdict.kind]++;
    return verdict;
  }

  /** The refusal of a statement the guard did not allow, counted by its rule. */
  #refuse(verdict: Exclude<GuardVerdict, { kind: "allow" }>): Buffer {
    if (verdict.kind === "deny") {
      this.options.countRefusal("policy", verdict.rule);
      return errorFrame(
        SqlState.insufficientPrivilege,
        `pgtoll policy: statement not allowed (${verdict.rule}): ${verdict.message}`,
      );
    }
    this.options.countRefusal("policy", INVALID_SQL_RULE);
    return errorFrame(SqlState.syntaxError, `pgtoll policy: invalid SQL: ${verdict.message}`);
  }
}

function isWrite(statement: GuardedStatement): boolean {
  return statement.writes;
}

function isRollback(statement: GuardedStatement): boolean {
  return statement.command === "ROLLBACK";
}

/** The statement of a query that shows, sets or resets a pgtoll setting (`SHOW pgtoll.<name>` ...), if any. */
function settingOf(statements: readonly GuardedStatement[]): GuardedStatement | undefined {
  for (const statement of statements) if (statement.pgtollSetting !== undefined) return statement;
  return undefined;
}
