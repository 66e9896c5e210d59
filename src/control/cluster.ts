import pg from "pg";

/**
 * The PostgreSQL cluster that hosts project databases (in embedded mode, pgtoll's own). Branch databases
 * and project roles are real objects on it, managed through a superuser connection.
 */
export interface ProjectCluster {
  /** Superuser pool on the cluster's maintenance database (`postgres`). */
  readonly admin: pg.Pool;
  readonly host: string;
  readonly port: number;
  /** Runs `work` with a superuser connection to one of the cluster's databases. */
  withDatabase<T>(database: string, work: (client: pg.Client) => Promise<T>): Promise<T>;
  /** The cluster's major version (e.g. 18). */
  majorVersion(): Promise<number>;
  close(): Promise<void>;
}

export function connectProjectCluster(adminUrl: string, poolSize = 4): ProjectCluster {
  const url = new URL(adminUrl);
  const admin = new pg.Pool({
    connectionString: adminUrl,
    max: poolSize,
    application_name: "pgtoll control",
  });
  admin.on("error", () => {});
  let version: number | undefined;
  return {
    admin,
    host: url.hostname,
    port: Number(url.port || 5432),
    async withDatabase(database, work) {
      const target = new URL(adminUrl);
      target.pathname = `/${encodeURIComponent(database)}`;
      const client = new pg.Client({
        connectionString: target.toString(),
        application_name: "pgtoll control",
      });
      client.on("error", () => {});
      await client.connect();
      try {
        return await work(client);
      } finally {
        await client.end().catch(() => {});
      }
    },
    async majorVersion() {
      if (version === undefined) {
        const { rows } = await admin.query(
          "SELECT current_setting('server_version_num')::int / 10000 AS major",
        );
        version = rows[0].major as number;
      }
      return version;
    },
    close: () => admin.end(),
  };
}
