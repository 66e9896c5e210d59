import type pg from "pg";

/** First key of the two-key advisory locks that mark a live control instance (any fixed int4). */
const LEASE_NAMESPACE = 741_162;

/**
 * This process's claim on the operations it runs: a row in `control_instances` whose id it holds a session
 * advisory lock on, on a connection kept open for the process's life. When the process dies the lock goes
 * with its connection, which is how other processes (or this one after a restart) know that its operations
 * have no runner any more and must be taken over.
 */
export class InstanceLease {
  private constructor(
    readonly id: number,
    private readonly client: pg.PoolClient,
  ) {}

  static async acquire(db: pg.Pool): Promise<InstanceLease> {
    const client = await db.connect();
    client.on("error", () => {});
    try {
      const { rows } = await client.query("INSERT INTO control_instances DEFAULT VALUES RETURNING id");
      const id = rows[0].id as number;
      await client.query("SELECT pg_advisory_lock($1, $2)", [LEASE_NAMESPACE, id]);
      return new InstanceLease(id, client);
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  /** Whether the instance `id` still runs: true while its lock is held by someone else. */
  async isAlive(id: number): Promise<boolean> {
    if (id === this.id) return true;
    const { rows } = await this.client.query("SELECT pg_try_advisory_lock($1, $2) AS free", [
      LEASE_NAMESPACE,
      id,
    ]);
    if (!rows[0].free) return true;
    await this.client.query("SELECT pg_advisory_unlock($1, $2)", [LEASE_NAMESPACE, id]);
    return false;
  }

  /** Gives the claim up (the connection closes, and the lock with it). */
  release(): void {
    this.client.release(true);
  }
}
