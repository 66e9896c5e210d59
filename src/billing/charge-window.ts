import { cutForDisplay, normalizedShapeText, type StatementShapes } from "../guard/statement-shape.js";
import { formatMicro } from "./money.js";

/** How a statement ended, when not plainly: it failed after delivering rows, or the balance cut it off. */
export type StatementOutcome = "failed" | "cutOff";

/** Most statement shapes listed by name in one entry; the rest are folded into `otherShapes`. */
export const MAX_LISTED_SHAPES = 20;

interface Tally {
  calls: number;
  rows: number;
  costMicro: bigint;
  /** Result bytes and statement milliseconds charged, when the price counts them (else 0, and not listed). */
  bytes: number;
  ms: number;
}

/** A text's statements, or a literal shape's: `sql` is the first of them this window saw. */
interface TextTally extends Tally {
  sql: string;
}

interface ShapeTally extends Tally {
  fingerprint: string;
  sample: string;
  /** The whole sample text normalised, then cut; absent when it does not parse. */
  normalized: string | undefined;
}

/**
 * The charges of one wire-proxy session not yet written to the ledger: every statement's cost (computed by the
 * cost rule, rounded up per statement) is added here, and the sum becomes one ledger entry when the window is
 * closed. Per statement this costs one map lookup by text, or by the guard's literal shape when it has one (a
 * simple-protocol client inlines its values, so each of its texts is new); fingerprints are worked out only when
 * the entry is written, once per text or shape.
 */
export class ChargeWindow {
  readonly openedAt = new Date();
  costMicro = 0n;
  statements = 0;
  rows = 0;
  failed = 0;
  cutOff = false;
  /** By text, or by literal shape (GuardedStatement.shape). */
  readonly #byText = new Map<string, TextTally>();
  /** Every statement's text in order, when the window is one query's (`queryMetadata`). */
  readonly #texts: string[] | undefined;

  /** `oneQuery`: the window holds one query's statements and becomes a REST-shaped entry (`queryMetadata`). */
  constructor(oneQuery = false) {
    this.#texts = oneQuery ? [] : undefined;
  }

  /**
   * Adds one statement: `costMicro` is what it was charged; `bytes` and `ms` what it was charged for beyond its
   * rows, when the price counts them; `shape` its literal shape, when the guard knew one.
   */
  add(
    sql: string,
    rows: number,
    costMicro: bigint,
    outcome?: StatementOutcome,
    bytes = 0,
    ms = 0,
    shape?: string,
  ): void {
    this.costMicro += costMicro;
    this.statements++;
    this.rows += rows;
    this.#texts?.push(sql);
    if (outcome === "failed") this.failed++;
    else if (outcome === "cutOff") this.cutOff = true;
    const key = shape ?? sql;
    const tally = this.#byText.get(key);
    if (tally) {
      tally.calls++;
      tally.rows += rows;
      tally.costMicro += costMicro;
      tally.bytes += bytes;
      tally.ms += ms;
    } else {
      this.#byText.set(key, { sql, calls: 1, rows, costMicro, bytes, ms });
    }
  }

  /**
   * The ledger entry's metadata of a window that holds one query (made with `oneQuery`), as REST writes a query:
   * its SQL (its statements' texts, joined), fingerprint and row count, with its bytes and time when charged.
   */
  queryMetadata(shapes: StatementShapes): Record<string, unknown> {
    const sql = (this.#texts ?? []).join("; ");
    let bytes = 0;
    let ms = 0;
    for (const tally of this.#byText.values()) {
      bytes += tally.bytes;
      ms += tally.ms;
    }
    const metadata: Record<string, unknown> = {
      sql,
      fingerprint: shapes.fingerprint(sql),
      rowCount: this.rows,
      source: "rest",
    };
    if (this.statements > 1) metadata.statements = this.statements;
    if (bytes > 0) metadata.bytes = bytes;
    if (ms > 0) metadata.ms = Math.round(ms);
    if (this.failed > 0) metadata.failed = true;
    if (this.cutOff) metadata.cutOff = true;
    return metadata;
  }

  /** Distinct texts (or shapes) in the window: the session closes it early when there are too many to keep. */
  get distinctTexts(): number {
    return this.#byText.size;
  }

  /**
   * The ledger entry's metadata: the session, the window, its counts and a breakdown by statement shape, the
   * costliest first, at most {@link MAX_LISTED_SHAPES} of them and the rest folded.
   */
  metadata(session: string, window: number, shapes: StatementShapes): Record<string, unknown> {
    const byShape = new Map<string, ShapeTally>();
    for (const { sql, ...tally } of this.#byText.values()) {
      const fingerprint = shapes.fingerprint(sql);
      const shape = byShape.get(fingerprint);
      if (shape) {
        shape.calls += tally.calls;
        shape.rows += tally.rows;
        shape.costMicro += tally.costMicro;
        shape.bytes += tally.bytes;
        shape.ms += tally.ms;
      } else {
        byShape.set(fingerprint, {
          fingerprint,
          sample: cutForDisplay(sql.trim()),
          normalized: normalizedShapeText(sql),
          ...tally,
        });
      }
    }
    const ranked = [...byShape.values()].sort((a, b) =>
      a.costMicro === b.costMicro ? b.calls - a.calls : a.costMicro > b.costMicro ? -1 : 1,
    );
    const listed = ranked.slice(0, MAX_LISTED_SHAPES);
    const folded = ranked.slice(MAX_LISTED_SHAPES);
    const metadata: Record<string, unknown> = {
      source: "proxy",
      session,
      window,
      openedAt: this.openedAt.toISOString(),
      closedAt: new Date().toISOString(),
      statements: this.statements,
      rowCount: this.rows,
      shapes: listed.map((shape) => ({
        fingerprint: shape.fingerprint,
        sample: shape.sample,
        ...(shape.normalized !== undefined ? { normalized: shape.normalized } : {}),
        calls: shape.calls,
        rows: shape.rows,
        // Only for a price that counts them: a rows-only entry is as it always was.
        ...(shape.bytes > 0 ? { bytes: shape.bytes } : {}),
        ...(shape.ms > 0 ? { ms: Math.round(shape.ms) } : {}),
        cost: formatMicro(shape.costMicro),
      })),
    };
    if (folded.length > 0) {
      const rest = folded.reduce(
        (sum, shape) => ({
          calls: sum.calls + shape.calls,
          rows: sum.rows + shape.rows,
          costMicro: sum.costMicro + shape.costMicro,
        }),
        { calls: 0, rows: 0, costMicro: 0n as bigint },
      );
      metadata.otherShapes = {
        shapes: folded.length,
        calls: rest.calls,
        rows: rest.rows,
        cost: formatMicro(rest.costMicro),
      };
    }
    if (this.failed > 0) metadata.failedStatements = this.failed;
    if (this.cutOff) metadata.cutOff = true;
    return metadata;
  }
}
