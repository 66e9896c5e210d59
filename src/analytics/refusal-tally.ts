import type { Queryable } from "../billing/ledger.js";

/** Why a statement was refused: a guard rule (or invalid SQL), or the agent's funds. */
export type RefusalKind = "policy" | "funds";

/*
 * Rules of kind `funds`: insufficient-balance (nothing available before a statement ran) and balance-cut-off (a
 * result stopped when the balance ran out).
 */

/** The rule counted for a statement the parser could not read. */
export const INVALID_SQL_RULE = "invalid-sql";

const HOUR_MS = 3_600_000;

/** A counted refusal's key: provider, kind, rule and hour (epoch hours), tab-separated. */
function keyOf(providerId: string, kind: RefusalKind, rule: string, hour: number): string {
  return `${providerId}\t${kind}\t${rule}\t${hour}`;
}

const UPSERT_SQL = `INSERT INTO refusal_counts AS r (provider_id, hour, kind, rule, refusals)
SELECT t.provider_id::uuid, to_timestamp(t.hour * 3600), t.kind, t.rule, t.refusals
  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[])
       AS t(provider_id, hour, kind, rule, refusals)
ON CONFLICT (provider_id, hour, kind, rule) DO UPDATE SET refusals = r.refusals + EXCLUDED.refusals`;

/**
 * Refused statements counted where they are refused, in memory: a refusal costs a map increment, never a
 * ledger write. {@link flushTo} adds the counts to `refusal_counts` (one row per provider, kind, rule and hour)
 * in one upsert; counts a failed flush could not write are kept for the next. {@link drainForMetrics} hands the
 * counts since its last call to the Prometheus counter.
 */
export class RefusalTally {
  readonly #unwritten = new Map<string, number>();
  readonly #uncollected = new Map<string, number>();

  /** Counts one refusal of a statement of `providerId`'s agents, now. */
  count(providerId: string, kind: RefusalKind, rule: string): void {
    const hour = Math.floor(Date.now() / HOUR_MS);
    const key = keyOf(providerId, kind, rule, hour);
    this.#unwritten.set(key, (this.#unwritten.get(key) ?? 0) + 1);
    const label = `${providerId}\t${kind}\t${rule}`;
    this.#uncollected.set(label, (this.#uncollected.get(label) ?? 0) + 1);
  }

  /** Refusals counted and not yet written. */
  get pending(): number {
    let sum = 0;
    for (const count of this.#unwritten.values()) sum += count;
    return sum;
  }

  /** Writes the counts so far into `refusal_counts`; on failure they stay counted and the error is thrown. */
  async flushTo(db: Queryable): Promise<void> {
    if (this.#unwritten.size === 0) return;
    const taken = [...this.#unwritten];
    this.#unwritten.clear();
    const columns: [string[], number[], string[], string[], number[]] = [[], [], [], [], []];
    for (const [key, refusals] of taken) {
      const [providerId, kind, rule, hour] = key.split("\t") as [string, string, string, string];
      columns[0].push(providerId);
      columns[1].push(Number(hour));
      columns[2].push(kind);
      columns[3].push(rule);
      columns[4].push(refusals);
    }
    try {
      await db.query(UPSERT_SQL, columns);
    } catch (error) {
      for (const [key, refusals] of taken)
        this.#unwritten.set(key, (this.#unwritten.get(key) ?? 0) + refusals);
      throw error;
    }
  }

  /** The counts since the last call, by provider, kind and rule. */
  drainForMetrics(): { providerId: string; kind: RefusalKind; rule: string; refusals: number }[] {
    const drained = [...this.#uncollected].map(([label, refusals]) => {
      const [providerId, kind, rule] = label.split("\t") as [string, RefusalKind, string];
      return { providerId, kind, rule, refusals };
    });
    this.#uncollected.clear();
    return drained;
  }
}
