import pg from "pg";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProxyMetrics } from "../../src/proxy/proxy-metrics.js";
import { addressMatcher } from "../../src/proxy/trusted-proxies.js";
import { startTestProxy, type TestProxy } from "../support/proxy.js";
import { proxyV1, proxyV2, startHeaderRelay } from "../support/proxy-header-relay.js";
import { selfSignedContext } from "../support/tls-certificate.js";
import { type EndpointProject, newEndpointProject } from "./endpoint-proxy-support.js";
import { clusterUrl, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
let cluster: pg.Pool;
const proxies: TestProxy[] = [];
const relays: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  cluster = new pg.Pool({ connectionString: clusterUrl(), max: 2 });
});
afterAll(async () => {
  for (const relay of relays) await relay.close();
  for (const proxy of proxies) await proxy.close();
  await cluster?.end();
  await h?.close();
});

/** The wire proxy for the harness's endpoints, taking PROXY headers from `trusted` peers only. */
async function proxyTrusting(trusted: string[], required: boolean): Promise<TestProxy> {
  const proxy = await startTestProxy(
    { ctx: h.ctx },
    {
      endpoints: { clusterUrl: clusterUrl(), proxyHost: "localhost", cluster },
      tls: await selfSignedContext(["*.localhost"]),
      proxyProtocol: { trusted: addressMatcher(trusted), required },
      // Each proxy counts in a registry of its own, so each test reads its own counts.
      metrics: createProxyMetrics(new Registry()),
    },
  );
  h.settings.proxyPort = proxy.port;
  proxies.push(proxy);
  return proxy;
}

async function relay(targetPort: number, header: Buffer): Promise<number> {
  const started = await startHeaderRelay(targetPort, header);
  relays.push(started);
  return started.port;
}

async function connectTo(port: number, project: EndpointProject) {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: "neondb_owner",
    database: "neondb",
    password: project.password,
    ssl: { rejectUnauthorized: false },
    options: `endpoint=${project.endpointId}`,
    connectionTimeoutMillis: 10_000,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.query("SELECT 1 AS ok")).rows[0];
  } finally {
    await client.end().catch(() => {});
  }
}

describe("settings.allowed_ips behind a load balancer speaking the PROXY protocol", () => {
  let project: EndpointProject;

  beforeAll(async () => {
    project = await newEndpointProject(h, key, {
      name: "behind a balancer",
      settings: { allowed_ips: { ips: ["203.0.113.0/24", "2001:db8::/32"] } },
    });
  });

  it("admits and refuses by the client address the header carries, v1 and v2, IPv4 and IPv6", async () => {
    const proxy = await proxyTrusting(["127.0.0.1"], true);
    expect(await connectTo(await relay(proxy.port, proxyV2("203.0.113.7")), project)).toEqual({ ok: 1 });
    expect(await connectTo(await relay(proxy.port, proxyV1("203.0.113.8")), project)).toEqual({ ok: 1 });
    expect(await connectTo(await relay(proxy.port, proxyV1("2001:db8::7")), project)).toEqual({ ok: 1 });
    await expect(connectTo(await relay(proxy.port, proxyV2("198.51.100.9")), project)).rejects.toMatchObject({
      code: "28000",
      message: expect.stringMatching(/^This IP address 198\.51\.100\.9 is not allowed/),
    });
    await expect(connectTo(await relay(proxy.port, proxyV1("2001:db9::1")), project)).rejects.toMatchObject({
      code: "28000",
    });
  });

  it("closes a connection from a trusted peer without a header when one is required", async () => {
    const proxy = await proxyTrusting(["127.0.0.1"], true);
    await expect(connectTo(proxy.port, project)).rejects.toThrow();
    expect(await proxy.ctx.metrics.proxyHeaders.get()).toMatchObject({
      values: expect.arrayContaining([expect.objectContaining({ labels: { outcome: "missing" }, value: 1 })]),
    });
  });

  it("closes a connection whose header comes from a peer it does not trust", async () => {
    const proxy = await proxyTrusting(["192.0.2.1"], false);
    await expect(connectTo(await relay(proxy.port, proxyV2("203.0.113.7")), project)).rejects.toThrow();
    expect(await proxy.ctx.metrics.proxyHeaders.get()).toMatchObject({
      values: expect.arrayContaining([
        expect.objectContaining({ labels: { outcome: "untrusted" }, value: 1 }),
      ]),
    });
  });
});
