import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
import {
  createProviderDatabase,
  postProviderRegistration,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(20);
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

const asAdmin = (sql: string) => runSql(sql, providerDb.adminUrl);

/** A login role on the provider database with `attributes`, then `grants`; returns its URL. */
async function roleUrl(attributes: string, grants = ""): Promise<string> {
  const role = `r_${randomBytes(5).toString("hex")}`;
  const password = randomBytes(8).toString("hex");
  await asAdmin(
    `CREATE ROLE ${role} LOGIN PASSWORD '${password}' ${attributes}; ${grants.replaceAll("$ROLE", role)}`,
  );
  const url = new URL(providerDb.url);
  url.username = role;
  url.password = password;
  return url.toString();
}

const register = (connectionString: string) => postProviderRegistration(gateway, connectionString);

describe("registration checks the provider's role", () => {
  it("refuses a superuser with 400, naming the right and the docs", async () => {
    const res = await register(providerDb.adminUrl);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(
      /^invalid connectionString: the role "\w+" has rights every agent would inherit: superuser\./,
    );
    expect(res.json().error).toContain("docs/security.md");
    expect(res.json().error).toContain("PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES=on");
  });

  it.each([
    ["BYPASSRLS", "BYPASSRLS", ""],
    ["CREATEROLE", "CREATEROLE", ""],
    ["CREATEDB", "CREATEDB", ""],
    ["REPLICATION", "REPLICATION", ""],
    ["member of pg_read_server_files", "", "GRANT pg_read_server_files TO $ROLE"],
    ["member of pg_execute_server_program", "", "GRANT pg_execute_server_program TO $ROLE"],
    ["member of pg_read_all_settings", "", "GRANT pg_read_all_settings TO $ROLE"],
    ["member of pg_signal_backend", "", "GRANT pg_signal_backend TO $ROLE"],
    // pg_monitor includes pg_read_all_settings and pg_read_all_stats: all three are named.
    ["member of pg_monitor", "", "GRANT pg_monitor TO $ROLE"],
  ])("refuses a role with %s", async (right, attributes, grants) => {
    const res = await register(await roleUrl(attributes, grants));
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(right);
  });

  it("names every right of a role that has several", async () => {
    const res = await register(await roleUrl("CREATEDB CREATEROLE", "GRANT pg_write_server_files TO $ROLE"));
    expect(res.json().error).toContain("CREATEROLE, CREATEDB, member of pg_write_server_files");
  });

  it("accepts a role that only owns its database, and one that may only read a table", async () => {
    expect((await register(providerDb.url)).statusCode).toBe(201);
    const reader = await roleUrl("", "GRANT SELECT ON items TO $ROLE");
    expect((await register(reader)).statusCode).toBe(201);
  });

  it("accepts a superuser when PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES is on, and logs a warning", async () => {
    const lines: string[] = [];
    const { pino } = await import("pino");
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const permissive = await startTestGateway({
      env: { PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES: "on" },
      logger,
    });
    try {
      const res = await permissive.app.inject({
        method: "POST",
        url: "/api/providers/register",
        payload: {
          name: "Local experiment",
          email: `${randomBytes(5).toString("hex")}@example.com`,
          walletAddress: `0x${randomBytes(20).toString("hex")}`,
          connectionString: providerDb.adminUrl,
        },
      });
      expect(res.statusCode).toBe(201);
      const warning = lines.map((line) => JSON.parse(line)).find((line) => line.rights);
      expect(warning).toMatchObject({ level: 40, rights: ["superuser"] });
    } finally {
      await permissive.close();
    }
  });
});

describe("every agent session checks the role again", () => {
  it("refuses REST queries and proxy sessions once the registered role was made a superuser", async () => {
    const url = await roleUrl("", "GRANT SELECT ON items TO $ROLE");
    const role = new URL(url).username;
    const { providerId } = await registerPricedProvider(gateway, url);
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const query = () =>
      gateway.app.inject({
        method: "POST",
        url: "/api/query",
        payload: { sql: "SELECT count(*) AS n FROM items", agentWallet: agent.wallet, providerId },
      });
    const session = async () => {
      const client = await connectAgent(proxy, agent, providerId);
      try {
        return (await client.query("SELECT count(*)::int AS n FROM items")).rows[0];
      } finally {
        await client.end();
      }
    };

    await asAdmin(`ALTER ROLE ${role} SUPERUSER`);
    const refused = await query();
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatch(/role is a superuser/);
    await expect(session()).rejects.toMatchObject({
      code: "08004",
      message: expect.stringMatching(/role is a superuser.*docs\/security\.md/),
    });

    await asAdmin(`ALTER ROLE ${role} NOSUPERUSER`);
    expect((await query()).statusCode).toBe(200);
    expect(await session()).toEqual({ n: 20 });
  });
});
