import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeSelfSignedCertificate } from "../net/self-signed-certificate.js";
import { devProxyTls, ensureDevCertificate } from "./dev-certificate.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});
const dataDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-devcert-"));
  dirs.push(dir);
  return dir;
};

describe("the dev stack's certificate", () => {
  it("is made once for loopback and the endpoints' wildcard, then reused", async () => {
    const dir = await dataDir();
    const first = await ensureDevCertificate(dir, "localhost");
    expect(first).toMatchObject({ certFile: join(dir, "tls", "dev-proxy.crt"), created: true });
    const pem = await readFile(first!.certFile, "utf8");
    const certificate = new X509Certificate(pem);
    expect(certificate.subjectAltName).toBe("DNS:localhost, DNS:*.localhost, IP Address:127.0.0.1");
    expect(certificate.checkIssued(certificate)).toBe(true);
    expect(certificate.ca).toBe(true);

    expect(await ensureDevCertificate(dir, "localhost")).toMatchObject({ created: false });
    expect(await readFile(first!.certFile, "utf8")).toBe(pem);
  });

  it("is made again when it expires within a day, or is for another proxy host", async () => {
    const dir = await dataDir();
    const made = (await ensureDevCertificate(dir, "localhost"))!;
    await writeSelfSignedCertificate({ ...made, days: 1 });
    const renewed = (await ensureDevCertificate(dir, "localhost"))!;
    expect(renewed.created).toBe(true);
    const validTo = Date.parse(new X509Certificate(await readFile(renewed.certFile)).validTo);
    expect(validTo - Date.now()).toBeGreaterThan(300 * 24 * 3600 * 1000);

    const moved = (await ensureDevCertificate(dir, "db.example.test"))!;
    expect(moved.created).toBe(true);
    expect(new X509Certificate(await readFile(moved.certFile)).subjectAltName).toBe(
      "DNS:localhost, DNS:*.localhost, IP Address:127.0.0.1, DNS:db.example.test, DNS:*.db.example.test",
    );
  });

  it("is left out when PGTOLL_TLS_CERT is configured, and without openssl the proxy runs without TLS", async () => {
    const dir = await dataDir();
    const progress: string[] = [];
    const tell = (line: string) => progress.push(line);
    expect(
      await devProxyTls({ dataDir: dir, proxyHost: "localhost", tlsCert: "/x.crt", tlsKey: "/x.key" }, tell),
    ).toEqual({});
    const path = process.env.PATH;
    process.env.PATH = join(dir, "no-such-bin");
    try {
      expect(await devProxyTls({ dataDir: dir, proxyHost: "localhost" }, tell)).toEqual({});
    } finally {
      process.env.PATH = path;
    }
    expect(progress).toEqual([
      expect.stringMatching(/^ {2}openssl not found: the wire proxy runs without TLS/),
    ]);
  });
});
