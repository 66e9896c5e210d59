import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import {
  connectAgent,
  fundedTestAgent,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";

// One gateway that accepts a superuser provider (as a provider experimenting locally would have it), so the
// guard is shown to hold even when the role itself could read everything.
let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
const providers: Record<"superuser" | "least-privilege", { id: string; agent: TestAgent }> = {} as never;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES: "on" } });
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(10);
  for (const [kind, url] of [
    ["superuser", providerDb.adminUrl],
    ["least-privilege", providerDb.url],
  ] as const) {
    const { providerId } = await registerPricedProvider(gateway, url);
    providers[kind] = { id: providerId, agent: await fundedTestAgent(gateway, providerId, 10_000_000n) };
  }
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function viaRest(kind: keyof typeof providers, sql: string) {
  const { id, agent } = providers[kind];
  const res = await gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId: id },
  });
  return { status: res.statusCode, body: res.json() as { error?: string; rows?: unknown[] } };
}

async function viaProxy(kind: keyof typeof providers, sql: string) {
  const { id, agent } = providers[kind];
  const client = await connectAgent(proxy, agent, id);
  try {
    return await client.query(sql).then(
      (result) => ({ rows: result.rows, code: undefined, message: "" }),
      (error: { code?: string; message: string }) => ({
        rows: undefined,
        code: error.code,
        message: error.message,
      }),
    );
  } finally {
    await client.end();
  }
}

const refused: [string, string, RegExp][] = [
  [
    "password verifiers",
    "SELECT rolname, rolpassword FROM pg_authid WHERE rolpassword IS NOT NULL",
    /sensitive-catalog/,
  ],
  ["pg_shadow", "SELECT usename, passwd FROM pg_shadow", /sensitive-catalog/],
  ["server paths", "SELECT current_setting('data_directory')", /sensitive-setting/],
  ["row locks", "SELECT * FROM items WHERE id = 1 FOR UPDATE", /no-row-lock/],
];

describe.each(["superuser", "least-privilege"] as const)("an agent of a %s provider", (kind) => {
  it.each(refused)(
    "is refused %s through POST /api/query (403, the rule named)",
    async (_what, sql, rule) => {
      const { status, body } = await viaRest(kind, sql);
      expect(status).toBe(403);
      expect(body.error).toMatch(rule);
      expect(body.rows).toBeUndefined();
    },
  );

  it.each(refused)(
    "is refused %s through the wire proxy (42501, the rule named)",
    async (_what, sql, rule) => {
      const { rows, code, message } = await viaProxy(kind, sql);
      expect(rows).toBeUndefined();
      expect(code).toBe("42501");
      expect(message).toMatch(rule);
    },
  );

  it("still reads the provider's data", async () => {
    expect((await viaRest(kind, "SELECT id FROM items WHERE id <= 2 ORDER BY id")).body.rows).toEqual([
      { id: 1 },
      { id: 2 },
    ]);
    expect((await viaProxy(kind, "SELECT id FROM items WHERE id = 3")).rows).toEqual([{ id: 3 }]);
  });
});
