import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let databaseUrl: string;
beforeAll(async () => {
  h = await startManagement();
  databaseUrl = (h.meta.options as { connectionString: string }).connectionString;
});
afterAll(async () => {
  await h?.close();
});

describe("pgtoll admin bootstrap", () => {
  it("creates a user and an organization, prints the first personal key once, and refuses to run twice", async () => {
    const email = `${randomBytes(4).toString("hex")}@example.com`;
    const cli = runCli(["admin", "bootstrap", "--email", email, "--org", "Acme Data"], {
      DATABASE_URL: databaseUrl,
    });
    expect(await cli.exited).toBe(0);
    const lines = cli.stdout().trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^created user ${email} \\(id [0-9a-f-]{36}\\)$`));
    const orgId = /created organization Acme Data \(id (org-[a-z0-9-]+)\)/.exec(cli.stdout())?.[1];
    expect(orgId).toBeDefined();
    const key = lines[lines.length - 1]!;
    expect(key).toMatch(/^[a-z0-9]{64}$/);

    // the key is a personal key of an administrator of the new organization
    const orgs = await h.call(key, "GET", "/users/me/organizations");
    expect(orgs.json().organizations).toEqual([expect.objectContaining({ id: orgId, name: "Acme Data" })]);
    expect((await h.call(key, "GET", "/users/me")).json().email).toBe(email);
    expect(
      (await h.call(key, "POST", `/organizations/${orgId}/api_keys`, { key_name: "org" })).statusCode,
    ).toBe(200);

    const again = runCli(["admin", "bootstrap", "--email", email], { DATABASE_URL: databaseUrl });
    expect(await again.exited).toBe(1);
    expect(again.stderr()).toMatch(/already has API keys/);
    expect(again.stdout()).toBe("");
  }, 60_000);

  it("explains its usage", async () => {
    const cli = runCli(["admin", "bootstrap"], { DATABASE_URL: databaseUrl });
    expect(await cli.exited).toBe(2);
    expect(cli.stderr()).toMatch(/--email is required/);
  });
});
