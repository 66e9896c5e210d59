import { mkdtemp, rm } from "node:fs/promises";
import { type AddressInfo, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runClientSession } from "../../src/proxy/client-session.js";
import type { TestProxy } from "../support/proxy.js";
import { expectAlive, expectEnded, renamedSession, startEndpointProxy } from "./endpoint-proxy-support.js";
import { type Neonctl, neonctlFor } from "./neonctl-support.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let proxy: TestProxy;
let key: string;
let configDir: string;
let neonctl: Neonctl;
const servers: Server[] = [];

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  const address = await h.app.listen({ host: "127.0.0.1", port: 0 });
  configDir = await mkdtemp(join(tmpdir(), "pgtoll-ip-allow-"));
  neonctl = neonctlFor(`${address}/api/v2`, key, configDir);
  proxy = await startEndpointProxy(h);
});
afterAll(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  await proxy?.close();
  await h?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

/**
 * The tests reach loopback only, so these sessions run through `runClientSession` on real loopback sockets whose
 * peer address reads as `peer` (documentation addresses), as the TLS test does for remote agents.
 */
async function proxyAsSeenFrom(peer: string): Promise<number> {
  const server = createServer((socket) => {
    Object.defineProperty(socket, "remoteAddress", { value: peer });
    void runClientSession(socket, proxy.ctx);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

interface Project {
  projectId: string;
  branchId: string;
  endpointId: string;
  password: string;
}

async function connectFrom(port: number, project: Project, password = project.password) {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "neondb_owner",
    database: "neondb",
    password,
    ssl: { rejectUnauthorized: false },
    options: `endpoint=${project.endpointId}`,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    const { rows } = await client.query("SELECT 1 AS ok");
    return rows[0];
  } finally {
    await client.end().catch(() => {});
  }
}

describe("settings.allowed_ips on endpoint sessions", () => {
  let project: Project;
  let v4: number;
  let v6: number;

  beforeAll(async () => {
    // Created through the API (its answer names the branch and endpoint); neonctl then manages the list.
    const created = (await h.call(key, "POST", "/projects", { project: { name: "fenced" } })).json();
    project = {
      projectId: created.project.id,
      branchId: created.branch.id,
      endpointId: created.endpoints[0].id,
      password: decodeURIComponent(new URL(created.connection_uris[0].connection_uri).password),
    };
    v4 = await proxyAsSeenFrom("203.0.113.7");
    v6 = await proxyAsSeenFrom("2001:db8::7");
  });

  const allow = (...args: string[]) =>
    neonctl.json(["ip-allow", "reset", ...args, "--project-id", project.projectId]);

  it("lets everyone in while the list is empty", async () => {
    expect(await connectFrom(v4, project)).toEqual({ ok: 1 });
    expect(await connectFrom(v6, project)).toEqual({ ok: 1 });
  });

  it("once neonctl adds an address, refuses every other one with 28000 and Neon's message, before the password is checked", async () => {
    await neonctl.json(["ip-allow", "add", "198.51.100.5", "--project-id", project.projectId]);
    const expected = {
      code: "28000",
      message: expect.stringMatching(
        /^This IP address 203\.0\.113\.7 is not allowed to connect to this endpoint/,
      ),
    };
    await expect(connectFrom(v4, project)).rejects.toMatchObject(expected);
    // A wrong password gets the same answer: nothing about the role is learnt from a refused address.
    await expect(connectFrom(v4, project, "wrong")).rejects.toMatchObject(expected);
    await expect(connectFrom(v6, project)).rejects.toMatchObject({ code: "28000" });
  });

  it("admits single addresses, CIDR ranges and dash ranges, IPv4 and IPv6", async () => {
    await allow("203.0.113.7");
    expect(await connectFrom(v4, project)).toEqual({ ok: 1 });
    await allow("203.0.113.0/24");
    expect(await connectFrom(v4, project)).toEqual({ ok: 1 });
    await allow("203.0.113.5-203.0.113.9");
    expect(await connectFrom(v4, project)).toEqual({ ok: 1 });
    await expect(connectFrom(v6, project)).rejects.toMatchObject({ code: "28000" });
    await allow("2001:db8::/32");
    expect(await connectFrom(v6, project)).toEqual({ ok: 1 });
    await expect(connectFrom(v4, project)).rejects.toMatchObject({ code: "28000" });
  });

  it("with protected_branches_only, restricts only protected branches", async () => {
    await neonctl.json([
      "ip-allow",
      "add",
      "198.51.100.5",
      "--protected-only",
      "--project-id",
      project.projectId,
    ]);
    expect(await connectFrom(v4, project)).toEqual({ ok: 1 });
    const protectedNow = await h.call(
      key,
      "PATCH",
      `/projects/${project.projectId}/branches/${project.branchId}`,
      {
        branch: { protected: true },
      },
    );
    expect(protectedNow.statusCode).toBe(200);
    await expect(connectFrom(v4, project)).rejects.toMatchObject({ code: "28000" });
  });

  it("ends the open sessions, renamed or not, of addresses a new list no longer admits", async () => {
    await allow("203.0.113.0/24", "2001:db8::/32");
    const tls = { ssl: { rejectUnauthorized: false } };
    const refusedLater = await renamedSession(proxy, project.endpointId, project.password, {
      port: v4,
      ...tls,
    });
    const admitted = await renamedSession(proxy, project.endpointId, project.password, { port: v6, ...tls });
    try {
      await allow("2001:db8::/32");
      await expectEnded(refusedLater);
      await expectAlive(admitted);
    } finally {
      await refusedLater.end().catch(() => {});
      await admitted.end().catch(() => {});
    }
  });

  it("refuses an entry that is no address or range, naming it", async () => {
    const res = await h.call(key, "PATCH", `/projects/${project.projectId}`, {
      project: { settings: { allowed_ips: { ips: ["203.0.113.0/40"] } } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain('"203.0.113.0/40" is not an IP address');
  });
});
