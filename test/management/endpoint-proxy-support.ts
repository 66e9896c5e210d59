import pg from "pg";
import { expect } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import { startTestProxy } from "../support/proxy.js";
import { selfSignedContext } from "../support/tls-certificate.js";
import { clusterUrl, type ManagementHarness } from "./support.js";

/**
 * The wire proxy in process for the harness's endpoints, with TLS (a `*.localhost` certificate, so endpoint
 * host names route by SNI); connection URIs then name its real port, as `pgtoll start` arranges.
 */
export async function startEndpointProxy(h: ManagementHarness): Promise<TestProxy> {
  const cluster = new pg.Pool({ connectionString: clusterUrl(), max: 2 });
  const proxy = await startTestProxy(
    { ctx: h.ctx },
    {
      endpoints: { clusterUrl: clusterUrl(), proxyHost: "localhost", cluster },
      tls: await selfSignedContext(["*.localhost"]),
    },
  );
  h.settings.proxyPort = proxy.port;
  return {
    ...proxy,
    async close() {
      await proxy.close();
      await cluster.end();
    },
  };
}

export interface EndpointProject {
  projectId: string;
  branchId: string;
  endpointId: string;
  /** neondb_owner's password, from the creation answer's connection URI. */
  password: string;
  uri: string;
}

/** A new project (one branch, one read_write endpoint) created with `key`. */
export async function newEndpointProject(
  h: ManagementHarness,
  key: string,
  project: Record<string, unknown> = {},
): Promise<EndpointProject> {
  const res = await h.call(key, "POST", "/projects", { project });
  if (res.statusCode !== 201) throw new Error(`project creation answered ${res.statusCode}: ${res.body}`);
  const created = res.json();
  const uri = created.connection_uris[0].connection_uri as string;
  return {
    projectId: created.project.id,
    branchId: created.branch.id,
    endpointId: created.endpoints[0].id,
    password: decodeURIComponent(new URL(uri).password),
    uri,
  };
}

export interface EndpointClientOptions {
  user?: string;
  database?: string;
  options?: string;
  application_name?: string;
  fallback_application_name?: string;
  /** Another port than the proxy's (a listener that shows the proxy another peer address). */
  port?: number;
  ssl?: { rejectUnauthorized: boolean };
}

/** A node-postgres client to an endpoint through the proxy over loopback (no TLS). */
export function endpointClient(
  proxy: TestProxy,
  endpointId: string | null,
  password: string,
  options: EndpointClientOptions = {},
): pg.Client {
  const { user, database, options: startupOptions, port, ...names } = options;
  const client = new pg.Client({
    host: "127.0.0.1",
    port: port ?? proxy.port,
    user: user ?? "neondb_owner",
    database: database ?? "neondb",
    password,
    ...names,
    ...(startupOptions !== undefined
      ? { options: startupOptions }
      : endpointId
        ? { options: `endpoint=${endpointId}` }
        : {}),
  });
  client.on("error", () => {});
  return client;
}

export async function connectError(client: pg.Client): Promise<{ code?: string; message: string }> {
  try {
    await client.connect();
  } catch (error) {
    return error as { code?: string; message: string };
  }
  await client.end();
  throw new Error("the connection was expected to be refused");
}

/**
 * An open endpoint session that renamed itself (`SET application_name`) first, as any client may: whatever ends
 * the endpoint's sessions must still find it.
 */
export async function renamedSession(
  proxy: TestProxy,
  endpointId: string,
  password: string,
  options: EndpointClientOptions = {},
): Promise<pg.Client> {
  const client = endpointClient(proxy, endpointId, password, options);
  await client.connect();
  await client.query("SET application_name = 'renamed by the client'");
  const { rows } = await client.query("SELECT 1 AS alive");
  expect(rows).toEqual([{ alive: 1 }]);
  return client;
}

/** The session was ended by the server: its next statement fails and the connection is gone. */
export async function expectEnded(client: pg.Client): Promise<void> {
  const failure = await client.query("SELECT 1 AS still_alive").then(
    (result) => result.rows,
    (error: Error) => error,
  );
  expect(failure, "the session still runs statements").toBeInstanceOf(Error);
  await client.end().catch(() => {});
}

/** The session is still open and runs statements. */
export async function expectAlive(client: pg.Client): Promise<void> {
  expect((await client.query("SELECT 1 AS alive")).rows).toEqual([{ alive: 1 }]);
}
