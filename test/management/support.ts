import { randomBytes } from "node:crypto";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import pg from "pg";
import { pino } from "pino";
import { inject } from "vitest";
import { loadConfig } from "../../src/config.js";
import { bootstrapAccount } from "../../src/control/bootstrap.js";
import type { ControlSettings } from "../../src/control/settings.js";
import { quoteIdent } from "../../src/control/sql.js";
import { createSecretBox, type SecretBox } from "../../src/providers/secret-box.js";
import { UpstreamPools } from "../../src/providers/upstream-pools.js";
import { buildApp } from "../../src/rest/app.js";
import type { GatewayContext } from "../../src/rest/context.js";
import { createMetrics } from "../../src/rest/plugins/metrics.js";
import { createMemoryStore } from "../../src/rest/plugins/rate-limit-store.js";
import { createMetadataDatabase } from "../support/database.js";

export interface ManagementApp {
  app: FastifyInstance;
  ctx: GatewayContext;
  close(): Promise<void>;
}

export interface ManagementHarness {
  app: FastifyInstance;
  ctx: GatewayContext;
  meta: pg.Pool;
  box: SecretBox;
  settings: ControlSettings;
  /** A JSON request with `Authorization: Bearer <key>`. */
  call(key: string | null, method: string, url: string, body?: unknown): Promise<LightMyRequestResponse>;
  /** A new user (and organization) with its first personal key, as `pgtoll admin bootstrap` makes them. */
  bootstrap(orgName?: string): Promise<{ key: string; userId: string; orgId: string | null; email: string }>;
  /** Another app instance on the same metadata database (a second process, or a restart). */
  startApp(overrides?: HarnessOptions): Promise<ManagementApp>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  rateLimit?: boolean;
  settings?: Partial<ControlSettings>;
}

export function clusterUrl(): string {
  return inject("adminDatabaseUrl");
}

/** The management API in process over a fresh metadata database; projects live on the test cluster. */
export async function startManagement(options: HarnessOptions = {}): Promise<ManagementHarness> {
  const meta = await createMetadataDatabase();
  const box = createSecretBox(randomBytes(32));
  const apps: ManagementApp[] = [];
  const baseSettings: ControlSettings = {
    clusterUrl: clusterUrl(),
    proxyHost: "localhost",
    proxyPort: 6543,
    proxyTls: false,
    regionId: "local",
    fenceGraceMs: 1000,
    operationWaitMs: 10_000,
  };
  const startApp = async (overrides: HarnessOptions = options): Promise<ManagementApp> => {
    const config = loadConfig({ PGTOLL_RATE_LIMIT: overrides.rateLimit ? "on" : "off" });
    const upstream = new UpstreamPools({ box, size: 1, statementTimeoutMs: 1000, refuseSuperuser: true });
    const rateLimitStore = createMemoryStore();
    const ctx: GatewayContext = {
      config,
      db: meta.pool,
      box,
      upstream,
      verifier: { verifyDeposit: () => Promise.reject(new Error("no chain in management tests")) },
      rateLimitStore,
      metrics: createMetrics(),
      logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
      management: { ...baseSettings, ...overrides.settings },
    };
    const app = await buildApp(ctx);
    await app.ready();
    const instance = {
      app,
      ctx,
      async close() {
        await app.close();
        await upstream.closeAll();
        await rateLimitStore.close();
      },
    };
    apps.push(instance);
    return instance;
  };
  const first = await startApp(options);
  const call = (key: string | null, method: string, url: string, body?: unknown) =>
    first.app.inject({
      method: method as "GET",
      url: `/api/v2${url}`,
      headers: key === null ? {} : { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
  return {
    app: first.app,
    ctx: first.ctx,
    meta: meta.pool,
    box,
    settings: first.ctx.management!,
    call,
    async bootstrap(orgName) {
      const email = `${randomBytes(5).toString("hex")}@example.com`;
      const result = await bootstrapAccount(meta.pool, email, orgName);
      return { key: result.apiKey, userId: result.user.id, orgId: result.organization?.id ?? null, email };
    },
    startApp,
    async close() {
      for (const instance of apps.reverse()) await instance.close().catch(() => {});
      // The embedded test cluster is thrown away after the run; a given server is cleaned up.
      if (process.env.PGTOLL_TEST_DATABASE_URL) await dropPhysicalObjects(meta.pool);
      await meta.close();
    },
  };
}

/** Drops every database and role the metadata database knows of from the shared test cluster. */
async function dropPhysicalObjects(db: pg.Pool): Promise<void> {
  const { rows: databases } = await db.query(
    "SELECT physical_name AS name FROM branch_databases UNION SELECT physical_name FROM physical_drops WHERE kind = 'database'",
  );
  const { rows: roles } = await db.query(
    "SELECT physical_name AS name FROM project_roles UNION SELECT physical_name FROM physical_drops WHERE kind = 'role'",
  );
  // Concurrent drops share the checkpoint each DROP DATABASE waits for.
  const admin = new pg.Pool({ connectionString: clusterUrl(), max: 8 });
  try {
    await Promise.all(
      databases.map(({ name }) => admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`)),
    );
    for (const { name } of roles)
      await admin.query(`DROP ROLE IF EXISTS ${quoteIdent(name)}`).catch(() => {});
  } finally {
    await admin.end();
  }
}

/** Polls `check` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A URL of the test cluster for one of its databases, as a given user. */
export function clusterUrlFor(database: string, user?: { name: string; password: string }): string {
  const url = new URL(clusterUrl());
  url.pathname = `/${database}`;
  if (user) {
    url.username = encodeURIComponent(user.name);
    url.password = encodeURIComponent(user.password);
  }
  return url.toString();
}
