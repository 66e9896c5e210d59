import { execFile } from "node:child_process";
import { chmod } from "node:fs/promises";
import { isIP } from "node:net";
import { promisify } from "node:util";

/** Thrown by {@link writeSelfSignedCertificate} when there is no `openssl` on the PATH. */
export class OpensslMissing extends Error {
  override name = "OpensslMissing";
}

export interface SelfSignedCertificateOptions {
  /** Where the PEM certificate is written. */
  certFile: string;
  /** Where the PEM private key (EC P-256, unencrypted) is written, readable by its owner only. */
  keyFile: string;
  /** Host names and IP addresses the certificate is for (subjectAltName); the first is also its CN. */
  names: string[];
  /** Days it is valid from now. */
  days: number;
}

/**
 * Makes a self-signed certificate and its key with the `openssl` command: no network, no dependency. The
 * certificate is its own CA (openssl's default v3_ca extensions), so a client trusts it by naming the
 * certificate file as its root (libpq: `PGSSLROOTCERT`).
 */
export async function writeSelfSignedCertificate(options: SelfSignedCertificateOptions): Promise<void> {
  const altNames = options.names.map((name) => (isIP(name) ? `IP:${name}` : `DNS:${name}`)).join(",");
  try {
    await promisify(execFile)(
      "openssl",
      [
        ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
        ...["-keyout", options.keyFile, "-out", options.certFile, "-days", String(options.days)],
        ...["-subj", `/CN=${options.names[0] ?? "localhost"}`, "-addext", `subjectAltName=${altNames}`],
      ],
      { timeout: 30_000 },
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new OpensslMissing("openssl was not found on the PATH");
    throw new Error(
      `openssl could not make a certificate: ${(error as { stderr?: string }).stderr ?? error}`,
    );
  }
  await chmod(options.keyFile, 0o600);
}
