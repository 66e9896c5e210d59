import type { Logger } from "pino";
import { formatPrice } from "../billing/cost.js";
import { formatMicro, parseMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import type { TransactionStatus } from "./backend-messages.js";
import { lastCostText } from "./last-cost-text.js";
import { ledgerUnavailable } from "./metering-errors.js";
import { errorFrame } from "./proxy-errors.js";
import {
  encodeCommandComplete,
  encodeDataRow,
  encodeParse,
  encodeQuery,
  encodeReadyForQuery,
  encodeRowDescription,
} from "./serializer.js";
import type { SessionMeter } from "./session-meter.js";

/** What the settings read of the session's meter. */
export type SettingsMeter = Pick<
  SessionMeter,
  | "writtenBalance"
  | "sessionCostMicro"
  | "price"
  | "budgetMicro"
  | "queryBudgetMicro"
  | "lastStatementCost"
  | "lastQueryCost"
  | "dailyLimit"
  | "synchronousCharges"
  | "maxResultRows"
  | "maxResultBytes"
>;

/** What a session's settings are read from. */
export interface SettingSource {
  meter: SettingsMeter;
  /** The provider's wallet. */
  depositAddress: string;
}

/** How an agent changes a setting, with `SET`, `RESET` or `-c name=value` at connect time. */
interface SettingChange {
  /** Whether `value` (null: RESET, or SET ... TO DEFAULT) is one the setting takes. */
  accepts(value: string | null): boolean;
  /** What the setting takes, for the error that refuses another value. */
  values: string;
  /** Applies an accepted value. */
  apply(source: SettingSource, value: string | null): void;
}

/** One in-band setting: how `SHOW` reads it, and for those an agent may change, how it changes. */
interface InBandSetting {
  show(source: SettingSource): string | Promise<string>;
  set?: SettingChange;
}

/** The largest budget accepted, in micro-USDC (one billion USDC). */
const MAX_BUDGET_MICRO = 1_000_000_000_000_000n;

/**
 * A value of `pgtoll.max_session_cost` or `pgtoll.max_query_cost`: a USDC amount with at most 6 decimals, or
 * `none` (no budget; also RESET). Undefined when it is neither.
 */
function parseBudget(value: string | null): bigint | null | undefined {
  const text = value?.trim().toLowerCase() ?? "none";
  if (text === "none" || text === "") return null;
  const micro = parseMicro(text);
  return micro === null || micro < 0n || micro > MAX_BUDGET_MICRO ? undefined : micro;
}

/** A budget setting: what it takes, and which of the meter's budgets it sets. */
function budgetChange(budget: "budgetMicro" | "queryBudgetMicro"): SettingChange {
  return {
    accepts: (value) => parseBudget(value) !== undefined,
    values: "a USDC amount with at most 6 decimals, such as '0.50', or 'none'",
    apply: ({ meter }, value) => {
      meter[budget] = parseBudget(value) ?? null;
    },
  };
}

/** How `SHOW` prints a budget. */
const budgetText = (budget: bigint | null) => (budget === null ? "none" : formatMicro(budget));

/** PostgreSQL's spellings of a boolean setting's value (the unique prefixes PostgreSQL also takes are not). */
const BOOLEAN_VALUES = new Map([
  ["on", true],
  ["off", false],
  ["true", true],
  ["false", false],
  ["yes", true],
  ["no", false],
  ["1", true],
  ["0", false],
]);

/** A boolean's value as PostgreSQL spells it; RESET is off. Undefined when it is none of them. */
function parseBoolean(value: string | null): boolean | undefined {
  return value === null ? false : BOOLEAN_VALUES.get(value.trim().toLowerCase());
}

/** A result cap's value: a whole number of rows or bytes from 1 up, or 'none'; RESET is none. */
function parseCap(value: string | null): number | null | undefined {
  const text = value?.trim().toLowerCase() ?? "none";
  if (text === "none" || text === "") return null;
  if (!/^[1-9][0-9]{0,14}$/.test(text)) return undefined;
  return Number(text);
}

const capText = (cap: number | null) => (cap === null ? "none" : String(cap));

function resultCapChange(cap: "maxResultRows" | "maxResultBytes", unit: string): SettingChange {
  return {
    accepts: (value) => parseCap(value) !== undefined,
    values: `a whole number of ${unit} from 1, or 'none'`,
    apply: ({ meter }, value) => {
      meter[cap] = parseCap(value) ?? null;
    },
  };
}

const synchronousCharges: SettingChange = {
  accepts: (value) => parseBoolean(value) !== undefined,
  values: "on or off",
  apply: ({ meter }, value) => {
    meter.synchronousCharges = parseBoolean(value) ?? false;
  },
};

/**
 * Settings the proxy answers itself, so that an agent with only a SQL tool can ask what it spends:
 * `SHOW pgtoll.balance` (USDC, with this session's charges written first), `SHOW pgtoll.session_cost` (USDC
 * charged to this session so far), `SHOW pgtoll.price` (every dimension of the price, markup included),
 * `SHOW pgtoll.deposit_address` (the provider's wallet, where USDC deposits go), `pgtoll.max_session_cost` (the
 * session's budget, which `SET` and `RESET` change), `pgtoll.max_query_cost` (what each query may cost: the
 * statements of one Query message, or of the extended-protocol messages up to a Sync), `SHOW pgtoll.daily_limit`
 * and `pgtoll.daily_remaining` (the agent's daily limit with the provider), `SHOW pgtoll.last_statement_cost`
 * (the last statement's cost and its parts, JSON), `SHOW pgtoll.last_query_cost` (the same for the last query
 * that charged a statement, summed), `pgtoll.synchronous_charges` (on: each query's ReadyForQuery waits until
 * what it cost is written to the ledger; off by default), and `pgtoll.max_result_rows` and
 * `pgtoll.max_result_bytes` (most rows, and bytes of row values, one query's answer carries: past either it is
 * cut off, the rows before charged; none by default). Free. Every in-band setting of a session is listed
 * here, whatever reads or writes it.
 */
const SETTINGS = new Map<string, InBandSetting>([
  ["pgtoll.balance", { show: async ({ meter }) => formatMicro(await meter.writtenBalance()) }],
  ["pgtoll.session_cost", { show: ({ meter }) => formatMicro(meter.sessionCostMicro) }],
  ["pgtoll.price", { show: ({ meter }) => formatPrice(meter.price) }],
  ["pgtoll.deposit_address", { show: ({ depositAddress }) => depositAddress }],
  [
    "pgtoll.max_session_cost",
    { show: ({ meter }) => budgetText(meter.budgetMicro), set: budgetChange("budgetMicro") },
  ],
  [
    "pgtoll.max_query_cost",
    { show: ({ meter }) => budgetText(meter.queryBudgetMicro), set: budgetChange("queryBudgetMicro") },
  ],
  [
    "pgtoll.daily_limit",
    {
      show: async ({ meter }) => {
        const limit = (await meter.dailyLimit()).dailyLimitMicro;
        return limit === null ? "none" : formatMicro(limit);
      },
    },
  ],
  [
    "pgtoll.daily_remaining",
    {
      show: async ({ meter }) => {
        const remaining = (await meter.dailyLimit()).remainingTodayMicro;
        return remaining === null ? "none" : formatMicro(remaining);
      },
    },
  ],
  ["pgtoll.last_statement_cost", { show: ({ meter }) => lastCostText(meter.lastStatementCost) }],
  ["pgtoll.last_query_cost", { show: ({ meter }) => lastCostText(meter.lastQueryCost) }],
  [
    "pgtoll.synchronous_charges",
    { show: ({ meter }) => (meter.synchronousCharges ? "on" : "off"), set: synchronousCharges },
  ],
  [
    "pgtoll.max_result_rows",
    { show: ({ meter }) => capText(meter.maxResultRows), set: resultCapChange("maxResultRows", "rows") },
  ],
  [
    "pgtoll.max_result_bytes",
    { show: ({ meter }) => capText(meter.maxResultBytes), set: resultCapChange("maxResultBytes", "bytes") },
  ],
]);

/** The settings an agent may SET (at startup too, with `-c name=value` in `options`). */
export const SETTABLE_SETTINGS: readonly string[] = [...SETTINGS].filter(([, s]) => s.set).map(([n]) => n);

/**
 * A session's in-band settings as the relay and the statement policy ask for them: the relay carries
 * `SHOW pgtoll.<name>` through the protocol (answered at once, or by a stand-in that keeps its place in a
 * pipeline); this says which settings exist and what they are.
 */
export interface SessionSettings {
  /** Why `SHOW <name>` in a query of `statementCount` statements is refused, as an ErrorResponse; else undefined. */
  refusal(name: string, statementCount: number): Buffer | undefined;
  /** The setting's current value, as `SHOW` prints it. */
  value(name: string): Promise<string>;
  /**
   * Why `SET <name>` (or RESET, `value` null) in a query of `statementCount` statements is refused, as an
   * ErrorResponse; else undefined, and the value is in force.
   */
  change(name: string, value: string | null, statementCount: number): Buffer | undefined;
}

/** The settings of a metered session. */
export function sessionSettings(source: SettingSource): SessionSettings {
  return new InBandSettings(source);
}

/** One session's settings: what a setting the session changes holds would be kept here. */
class InBandSettings implements SessionSettings {
  constructor(private readonly source: SettingSource) {}

  /** Refused: an unknown name, or other statements in the same query. */
  refusal(name: string, statementCount: number): Buffer | undefined {
    if (!SETTINGS.has(name)) return unknownSettingError(name);
    if (statementCount > 1)
      return errorFrame(SqlState.featureNotSupported, `SHOW ${name} must be sent as a query of its own`);
    return undefined;
  }

  change(name: string, value: string | null, statementCount: number): Buffer | undefined {
    const setting = SETTINGS.get(name);
    if (!setting) return unknownSettingError(name);
    if (!setting.set)
      return errorFrame(SqlState.cantChangeRuntimeParam, `parameter "${name}" cannot be changed`, {
        hint: `pgtoll settings an agent may change: ${SETTABLE_SETTINGS.join(", ")}`,
      });
    if (statementCount > 1)
      return errorFrame(SqlState.featureNotSupported, `SET ${name} must be sent as a query of its own`);
    const refused = invalidSettingValue(name, value);
    if (refused !== undefined)
      return errorFrame(SqlState.invalidParameterValue, refused, { hint: setting.set.values });
    setting.set.apply(this.source, value);
    return undefined;
  }

  async value(name: string): Promise<string> {
    const setting = SETTINGS.get(name);
    if (!setting) throw new Error(`no in-band setting ${name}`);
    return setting.show(this.source);
  }
}

/**
 * Why `value` is not one an agent may give the setting `name` (one of {@link SETTABLE_SETTINGS}): the message of
 * the error that refuses it, the values it takes included; undefined when it is accepted.
 */
export function invalidSettingValue(name: string, value: string | null): string | undefined {
  const change = SETTINGS.get(name)?.set;
  if (!change) return `parameter "${name}" cannot be changed`;
  if (change.accepts(value)) return undefined;
  return `invalid value for parameter "${name}": "${value}": ${change.values}`;
}

/** The error PostgreSQL gives for a setting it does not know, for `SHOW pgtoll.<anything else>`. */
function unknownSettingError(name: string): Buffer {
  return errorFrame(SqlState.undefinedObject, `unrecognized configuration parameter "${name}"`, {
    hint: `pgtoll answers ${[...SETTINGS.keys()].join(", ")}`,
  });
}

/** The error in place of a setting whose value could not be read (the balance needs the ledger). */
export function unreadableSetting(logger: Logger, error: unknown): Buffer {
  logger.warn({ err: error }, "could not read the balance for SHOW");
  return ledgerUnavailable();
}

/** The whole answer to a simple-protocol `SHOW pgtoll.<name>`, as PostgreSQL sends one, ReadyForQuery included. */
export function localShowAnswer(name: string, value: string, status: TransactionStatus): Buffer {
  return Buffer.concat([
    encodeRowDescription([name]),
    encodeDataRow([value]),
    encodeCommandComplete("SHOW"),
    encodeReadyForQuery(status),
  ]);
}

/** The value's DataRow and the CommandComplete of `SHOW`, in place of the stand-in's own. */
export function showResult(value: string): Buffer {
  return Buffer.concat([encodeDataRow([value]), encodeCommandComplete("SHOW")]);
}

/**
 * When other statements are still upstream (a pipelined query, or any extended-protocol use), the setting is
 * sent upstream as a constant query of the same shape (one text column named like the setting), so the
 * upstream keeps the protocol's order, the transaction's state and named statements; the proxy replaces its row
 * and tag with the value. It reads nothing and is not charged.
 */
function standInSql(name: string): string {
  return `SELECT NULL::text AS "${name}"`;
}

export function standInQuery(name: string): Buffer {
  return encodeQuery(standInSql(name));
}

/** A Parse of the stand-in, keeping the client's statement name. */
export function standInParse(statementName: string, name: string): Buffer {
  return encodeParse(statementName, standInSql(name));
}
