import type { Logger } from "pino";
import { formatPricePer1000Rows } from "../billing/cost.js";
import { formatMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import type { TransactionStatus } from "./backend-messages.js";
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
export type SettingsMeter = Pick<SessionMeter, "writtenBalance" | "sessionCostMicro" | "price">;

/** What a session's settings are read from. */
export interface SettingSource {
  meter: SettingsMeter;
  /** The provider's wallet. */
  depositAddress: string;
}

/** One in-band setting: how `SHOW` reads it. */
interface InBandSetting {
  show(source: SettingSource): string | Promise<string>;
}

/**
 * Settings the proxy answers itself, so that an agent with only a SQL tool can ask what it spends:
 * `SHOW pgtoll.balance` (USDC, with this session's charges written first), `SHOW pgtoll.session_cost` (USDC
 * charged to this session so far), `SHOW pgtoll.price` (USDC per 1000 rows, markup included) and
 * `SHOW pgtoll.deposit_address` (the provider's wallet, where USDC deposits go). Free. Every in-band setting of
 * a session is listed here, whatever reads or writes it.
 */
const SETTINGS = new Map<string, InBandSetting>([
  ["pgtoll.balance", { show: async ({ meter }) => formatMicro(await meter.writtenBalance()) }],
  ["pgtoll.session_cost", { show: ({ meter }) => formatMicro(meter.sessionCostMicro) }],
  ["pgtoll.price", { show: ({ meter }) => formatPricePer1000Rows(meter.price) }],
  ["pgtoll.deposit_address", { show: ({ depositAddress }) => depositAddress }],
]);

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

  async value(name: string): Promise<string> {
    const setting = SETTINGS.get(name);
    if (!setting) throw new Error(`no in-band setting ${name}`);
    return setting.show(this.source);
  }
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
