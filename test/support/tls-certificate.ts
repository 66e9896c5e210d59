import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSecureContext, type SecureContext } from "node:tls";

/** A throwaway self-signed certificate for `subject` (openssl), as a TLS server context. */
export async function selfSignedContext(subject = "/CN=localhost"): Promise<SecureContext> {
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-tls-"));
  try {
    const [keyFile, certFile] = [join(dir, "key.pem"), join(dir, "cert.pem")];
    execFileSync(
      "openssl",
      [
        ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
        ...["-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", subject],
      ],
      { stdio: "ignore" },
    );
    return createSecureContext({ key: await readFile(keyFile), cert: await readFile(certFile) });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
