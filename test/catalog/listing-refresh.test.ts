import { afterAll, beforeAll, expect, it } from "vitest";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let db: OwnedTestDatabase;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_CATALOG_REFRESH_INTERVAL_MS: "1000" } });
  db = await createProviderDatabase(5);
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await db?.drop();
});

it("reads a listed provider's tables again on its schedule (PGTOLL_CATALOG_REFRESH_INTERVAL_MS)", async () => {
  const { providerId, apiKey } = await registerPricedProvider(gateway, db.url);
  const put = await gateway.app.inject({
    method: "PUT",
    url: `/api/providers/${providerId}/listing`,
    headers: { "x-api-key": apiKey },
    payload: { listed: true },
  });
  expect(put.statusCode, put.body).toBe(200);
  const tables = async () =>
    (
      (await gateway.app.inject({ method: "GET", url: `/api/providers/${providerId}` })).json() as {
        tables: { name: string }[];
      }
    ).tables.map((table) => table.name);
  expect(await tables()).toEqual(["items", "orders"]);
  await runSql("CREATE TABLE shipments (id int)", db.url);
  const deadline = Date.now() + 15_000;
  while (!(await tables()).includes("shipments") && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 250));
  expect(await tables()).toEqual(["items", "orders", "shipments"]);
});
