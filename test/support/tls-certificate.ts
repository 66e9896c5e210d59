import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSecureContext, type SecureContext } from "node:tls";
import { writeSelfSignedCertificate } from "../../src/net/self-signed-certificate.js";

/** A throwaway self-signed certificate for `names` (openssl, as pgtoll dev makes its own), as a TLS server context. */
export async function selfSignedContext(names = ["localhost"]): Promise<SecureContext> {
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-tls-"));
  try {
    const [keyFile, certFile] = [join(dir, "key.pem"), join(dir, "cert.pem")];
    await writeSelfSignedCertificate({ certFile, keyFile, names, days: 1 });
    return createSecureContext({ key: await readFile(keyFile), cert: await readFile(certFile) });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
