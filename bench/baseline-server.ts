/**
 * The REST baseline: a minimal fastify route that runs the request's SQL with node-postgres directly, no guard,
 * no metering. Run as its own process by the benchmark (`node --import tsx bench/baseline-server.ts`);
 * prints "baseline ready <url>".
 */
import Fastify from "fastify";
import pg from "pg";

const pool = new pg.Pool({
  connectionString: process.env.BASELINE_DATABASE_URL,
  max: Number(process.env.BASELINE_POOL_SIZE ?? 5),
});
pool.on("error", () => {});

const app = Fastify();
app.post<{ Body: { sql: string; params?: unknown[] } }>("/api/query", async (request) => {
  const result = await pool.query(request.body.sql, request.body.params);
  return { rows: result.rows, rowCount: result.rowCount };
});

const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`baseline ready ${url}\n`);

process.once("SIGTERM", () => {
  void app
    .close()
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
