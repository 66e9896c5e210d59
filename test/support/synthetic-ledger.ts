import type pg from "pg";

/** What {@link fillSyntheticLedger} writes. */
export interface SyntheticLedger {
  /** Provider ids, in the order entries were spread over them. */
  providerIds: string[];
}

/**
 * Writes `entries` charge-window entries (each 3 statements, 10 rows, 0.001 USDC, with a `shapes` breakdown
 * of one of 20 shapes) spread evenly over `providers` providers and `agentsPerProvider` agents each, over the
 * last `days` days in the order they are written (as a ledger grows: ids and times ascend together), then
 * ANALYZEs the ledger: a ledger of the size and spread the analytics are planned for, written by one statement.
 */
export async function fillSyntheticLedger(
  db: pg.Pool,
  options: { providers: number; agentsPerProvider: number; entries: number; days: number },
): Promise<SyntheticLedger> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO providers (id, name, email, wallet_address, connection_secret, api_key_hash)
     SELECT gen_random_uuid(), 'synthetic ' || g, 'synthetic-' || g || '-' || gen_random_uuid() || '@example.com',
            '0x' || lpad(to_hex(g) || substr(md5(random()::text), 1, 8), 40, '0'), 'x', '\\x00'
       FROM generate_series(1, $1) g
     RETURNING id`,
    [options.providers],
  );
  const providerIds = rows.map((row) => row.id);
  await db.query(
    `INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                 balance_after_micro, metadata, created_at)
     SELECT '0x' || lpad(to_hex((g / $2) % $3), 40, '0'), ($1::uuid[])[1 + g % $2], 'query', -1000, 1000000, 999000,
            jsonb_build_object('source', 'proxy', 'statements', 3, 'rowCount', 10, 'shapes', jsonb_build_array(
              jsonb_build_object('fingerprint', 'shape' || (g % 20), 'sample', 'SELECT ' || (g % 20),
                                 'calls', 3, 'rows', 10, 'cost', '0.001000'))),
            now() - (1 - g::float8 / $4) * make_interval(days => $5)
       FROM generate_series(1, $4) g`,
    [providerIds, options.providers, options.agentsPerProvider, options.entries, options.days],
  );
  await db.query("ANALYZE ledger_entries");
  return { providerIds };
}
