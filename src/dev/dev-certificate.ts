import { X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { OpensslMissing, writeSelfSignedCertificate } from "../net/self-signed-certificate.js";

/** Days a dev certificate is valid; one that has less than {@link RENEW_BEFORE_MS} left is made again. */
const VALID_DAYS = 365;
const RENEW_BEFORE_MS = 24 * 3600 * 1000;

export interface DevCertificate {
  certFile: string;
  keyFile: string;
  /** The names it is for: the proxy's host, its endpoints' wildcard, loopback. */
  names: string[];
  /** Made at this start (first start, expired, or for other names), rather than reused. */
  created: boolean;
}

/**
 * The names the wire proxy answers to on one machine: loopback, and `<proxyHost>` with the wildcard of its
 * endpoints' hosts (`ep-….localhost`, `ep-…-pooler.localhost`), which the proxy routes on by SNI.
 */
export function devCertificateNames(proxyHost: string): string[] {
  const host = proxyHost.toLowerCase();
  const names = ["localhost", "*.localhost", "127.0.0.1"];
  if (!names.includes(host)) names.push(host, ...(isIP(host) ? [] : [`*.${host}`]));
  return names;
}

/** The subjectAltName text node:crypto shows for `names`, to tell whether a stored certificate covers them. */
const altNameText = (names: string[]) =>
  names.map((name) => (isIP(name) ? `IP Address:${name}` : `DNS:${name}`)).join(", ");

/**
 * The dev stack's TLS certificate and key in `<dataDir>/tls/`: made with openssl at first start, reused
 * after, made again when it is about to expire or is for other names. Null when openssl is missing.
 */
export async function ensureDevCertificate(
  dataDir: string,
  proxyHost: string,
): Promise<DevCertificate | null> {
  const dir = join(dataDir, "tls");
  const certFile = join(dir, "dev-proxy.crt");
  const keyFile = join(dir, "dev-proxy.key");
  const names = devCertificateNames(proxyHost);
  if (existsSync(certFile) && existsSync(keyFile)) {
    try {
      const stored = new X509Certificate(await readFile(certFile));
      const current = Date.parse(stored.validTo) - Date.now() > RENEW_BEFORE_MS;
      if (current && stored.subjectAltName === altNameText(names))
        return { certFile, keyFile, names, created: false };
    } catch {
      // Unreadable: made again below.
    }
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    await writeSelfSignedCertificate({ certFile, keyFile, names, days: VALID_DAYS });
  } catch (error) {
    if (error instanceof OpensslMissing) return null;
    throw error;
  }
  return { certFile, keyFile, names, created: true };
}

/** What the dev stack starts the wire proxy with. */
export interface DevProxyTls {
  tlsCert?: string;
  tlsKey?: string;
  /** The dev certificate and its names, when the proxy uses it: clients trust it as their root (PGSSLROOTCERT). */
  rootCert?: { file: string; names: string[] };
}

/**
 * The proxy's TLS under `pgtoll dev`: PGTOLL_TLS_CERT/KEY when configured, else the dev certificate; none when
 * openssl is missing, which `progress` is told in one line.
 */
export async function devProxyTls(
  config: { dataDir: string; proxyHost: string; tlsCert?: string; tlsKey?: string },
  progress: (line: string) => void,
): Promise<DevProxyTls> {
  if (config.tlsCert || config.tlsKey) return {};
  const certificate = await ensureDevCertificate(config.dataDir, config.proxyHost);
  if (!certificate) {
    progress(
      "  openssl not found: the wire proxy runs without TLS (sslmode=disable; neonctl connection-string needs TLS)",
    );
    return {};
  }
  progress(
    `  TLS certificate for ${certificate.names.join(", ")} ${certificate.created ? "made" : "reused"}: ${certificate.certFile}`,
  );
  return {
    tlsCert: certificate.certFile,
    tlsKey: certificate.keyFile,
    rootCert: { file: certificate.certFile, names: certificate.names },
  };
}
