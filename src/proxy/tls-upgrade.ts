import { type SecureContext, TLSSocket } from "node:tls";
import { UnansweredClose } from "./proxy-errors.js";
import type { StartupStream } from "./startup-stream.js";

/**
 * PostgreSQL's ALPN protocol (PostgreSQL 17 on): a client that offers ALPN must offer it, with direct TLS or after
 * an SSLRequest, or the handshake fails with a no_application_protocol alert; direct TLS requires it.
 */
export const POSTGRESQL_ALPN = "postgresql";

/**
 * Continues the connection over TLS: after an SSLRequest answered 'S', or at once when the client opened with a
 * TLS ClientHello (`sslnegotiation=direct`), whose bytes, already read, are `clientHello`. A failed handshake ends
 * the connection without a word, as PostgreSQL ends it: the TLS alert is all the client gets.
 */
export function upgradeToTls(
  stream: StartupStream,
  secureContext: SecureContext,
  clientHello?: Buffer,
): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const raw = stream.socket;
    if (clientHello) {
      // Put the ClientHello back in front of the socket's reads: a TLS socket first takes what its socket buffered.
      raw.pause();
      raw.unshift(clientHello);
    }
    const secure = new TLSSocket(raw, { isServer: true, secureContext, ALPNProtocols: [POSTGRESQL_ALPN] });
    secure.on("error", () => {});
    stream.upgrade(secure);
    secure.once("secure", () => resolve(secure));
    secure.once("error", (error) =>
      reject(new UnansweredClose(`TLS handshake failed: ${error.message}`, "tls_handshake")),
    );
  });
}
