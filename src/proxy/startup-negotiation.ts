import { type SecureContext, TLSSocket } from "node:tls";
import type { ProxyContext } from "./proxy-context.js";
import { SqlState, StartupRefusal, UnansweredClose } from "./proxy-errors.js";
import { encodeGSSENCResponse, encodeSSLResponse } from "./serializer.js";
import type { StartupPacket } from "./startup-parser.js";
import type { StartupStream } from "./startup-stream.js";

export type StartupMessage = Extract<StartupPacket, { kind: "startup" }>;

/**
 * SSL and GSS negotiation and cancel requests, up to the StartupMessage; null when the connection is done.
 *
 * As PostgreSQL does, each kind of encryption request is answered once, and neither once TLS is on: a client may
 * try GSS then TLS or TLS then GSS, but a second request of a kind, or any inside TLS, is a protocol violation.
 */
export async function negotiate(stream: StartupStream, ctx: ProxyContext): Promise<StartupMessage | null> {
  const answered = { sslRequest: false, gssencRequest: false };
  for (;;) {
    const packet = await stream.nextPacket();
    switch (packet.kind) {
      case "sslRequest":
      case "gssencRequest": {
        const name = packet.kind === "sslRequest" ? "SSLRequest" : "GSSENCRequest";
        if (stream.socket instanceof TLSSocket) throw violation(`${name} after the connection was encrypted`);
        if (answered[packet.kind]) throw violation(`${name} after an earlier ${name}`);
        answered[packet.kind] = true;
        // Bytes sent before the encryption handshake could be injected by a man in the middle (CVE-2021-23214).
        if (packet.rest.length > 0) throw violation("unexpected data after an encryption request");
        if (packet.kind === "gssencRequest" || !ctx.tls) {
          stream.socket.write(
            packet.kind === "gssencRequest" ? encodeGSSENCResponse(false) : encodeSSLResponse(false),
          );
          continue;
        }
        stream.socket.write(encodeSSLResponse(true));
        await upgradeToTls(stream, ctx.tls);
        continue;
      }
      case "cancelRequest":
        ctx.registry.cancel(packet.processId, packet.secretKey);
        return null;
      case "startup":
        return packet;
      case "unsupportedProtocol":
        throw new StartupRefusal(
          SqlState.featureNotSupported,
          `unsupported frontend protocol ${packet.protocol.major}.${packet.protocol.minor}: pgtoll speaks 3.0`,
          "protocol_version",
        );
      case "tlsHandshake":
        throw violation("direct TLS is not supported; use sslnegotiation=postgres");
      case "badLayout":
        throw violation(packet.reason);
      case "malformed":
        throw new UnansweredClose(packet.reason, "malformed_startup");
      default:
        throw violation("unexpected startup packet");
    }
  }
}

function violation(message: string): StartupRefusal {
  return new StartupRefusal(SqlState.protocolViolation, message, "protocol");
}

function upgradeToTls(stream: StartupStream, secureContext: SecureContext): Promise<void> {
  return new Promise((resolve, reject) => {
    const secure = new TLSSocket(stream.socket, { isServer: true, secureContext });
    secure.on("error", () => {});
    stream.upgrade(secure);
    secure.once("secure", () => resolve());
    secure.once("error", (error) =>
      reject(new StartupRefusal(SqlState.protocolViolation, `TLS handshake failed: ${error.message}`, "tls")),
    );
  });
}
