/**
 * The REST "metered by hand" side: a fastify route that meters a query the way an application would without
 * pgtoll, on the same ledger database: it checks the agent's balance, runs the query, then in one transaction
 * takes the cost from the balance with a conditional UPDATE and INSERTs one ledger entry, committed per request.
 * No guard, no estimate, no holds. Run as its own process by the benchmark
 * (`node --import tsx bench/hand-metered-server.ts`); prints "hand-metered ready <url>".
 *
 * Its tables live in a schema of their own (`hand_metered`) in the ledger database, made here at start.
 */
import Fastify from "fastify";
import pg from "pg";

const poolSize = Number(process.env.BASELINE_POOL_SIZE ?? 5);
const data = new pg.Pool({ connectionString: process.env.BASELINE_DATABASE_URL, max: poolSize });
const ledger = new pg.Pool({ connectionString: process.env.HAND_METERED_LEDGER_URL, max: poolSize });
data.on("error", () => {});
ledger.on("error", () => {});

/** The bench's default price per row in micro-USDC (0.1 USDC per 1 000 rows, markup 1.2). */
const PRICE_MICRO_PER_ROW = 120n;
const AGENT = "hand-metered-agent";

await ledger.query(`
  CREATE SCHEMA IF NOT EXISTS hand_metered;
  CREATE TABLE IF NOT EXISTS hand_metered.balances (
    agent text PRIMARY KEY,
    balance_micro bigint NOT NULL CHECK (balance_micro >= 0)
  );
  CREATE TABLE IF NOT EXISTS hand_metered.ledger (
    id bigserial PRIMARY KEY,
    agent text NOT NULL,
    amount_micro bigint NOT NULL,
    balance_after_micro bigint NOT NULL,
    sql text NOT NULL,
    row_count integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  );
  INSERT INTO hand_metered.balances VALUES ('${AGENT}', 1000000000000)
    ON CONFLICT (agent) DO UPDATE SET balance_micro = EXCLUDED.balance_micro;
`);

const app = Fastify();
app.post<{ Body: { sql: string; params?: unknown[] } }>("/api/query", async (request, reply) => {
  const balance = await ledger.query<{ balance_micro: string }>(
    "SELECT balance_micro FROM hand_metered.balances WHERE agent = $1",
    [AGENT],
  );
  if (BigInt(balance.rows[0]?.balance_micro ?? 0) <= 0n) return reply.code(402).send({ error: "no balance" });
  const result = await data.query(request.body.sql, request.body.params);
  const cost = BigInt(result.rowCount ?? 0) * PRICE_MICRO_PER_ROW;
  const client = await ledger.connect();
  try {
    await client.query("BEGIN");
    const taken = await client.query<{ balance_micro: string }>(
      "UPDATE hand_metered.balances SET balance_micro = balance_micro - $2 WHERE agent = $1 AND balance_micro >= $2 RETURNING balance_micro",
      [AGENT, cost.toString()],
    );
    if (taken.rowCount !== 1) {
      await client.query("ROLLBACK");
      return reply.code(402).send({ error: "insufficient balance" });
    }
    await client.query(
      "INSERT INTO hand_metered.ledger (agent, amount_micro, balance_after_micro, sql, row_count) VALUES ($1, $2, $3, $4, $5)",
      [AGENT, (-cost).toString(), taken.rows[0]!.balance_micro, request.body.sql, result.rowCount ?? 0],
    );
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
  return { rows: result.rows, rowCount: result.rowCount };
});

const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`hand-metered ready ${url}\n`);

process.once("SIGTERM", () => {
  void app
    .close()
    .then(() => Promise.all([data.end(), ledger.end()]))
    .finally(() => process.exit(0));
});
