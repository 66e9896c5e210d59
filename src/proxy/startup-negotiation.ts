import { TLSSocket } from "node:tls";
import { SqlState } from "../db/sql-state.js";
import type { ProxyContext } from "./proxy-context.js";
import { StartupRefusal, UnansweredClose } from "./proxy-errors.js";
import { encodeGSSENCResponse, encodeSSLResponse } from "./serializer.js";
import { type StartupPacket, UNTRUSTED_PROXY_HEADER } from "./startup-parser.js";
import type { StartupStream } from "./startup-stream.js";
import { POSTGRESQL_ALPN, upgradeToTls } from "./tls-upgrade.js";

export type StartupMessage = Extract<StartupPacket, { kind: "startup" }>;

/**
 * SSL and GSS negotiation and cancel requests, up to the StartupMessage; null when the connection is done.
 *
 * As PostgreSQL does, each kind of encryption request is answered once, and neither once TLS is on: a client may
 * try GSS then TLS or TLS then GSS, but a second request of a kind, or any inside TLS, is a protocol violation.
 * A connection may also open with a TLS handshake (direct TLS), with ALPN `postgresql`.
 */
export async function negotiate(stream: StartupStream, ctx: ProxyContext): Promise<StartupMessage | null> {
  const answered = { sslRequest: false, gssencRequest: false };
  for (let first = true; ; first = false) {
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
        await directTls(stream, ctx, first, packet.rest);
        continue;
      case "badLayout":
        throw violation(packet.reason);
      case "malformed":
        throw new UnansweredClose(
          packet.reason,
          packet.reason === UNTRUSTED_PROXY_HEADER ? "untrusted_proxy_header" : "malformed_startup",
        );
      default:
        throw violation("unexpected startup packet");
    }
  }
}

/**
 * A TLS ClientHello as the connection's first bytes (`sslnegotiation=direct`), refused as PostgreSQL refuses it:
 * without a word when TLS is not configured, or when the client did not agree on ALPN `postgresql`. Anywhere
 * else it is no startup packet at all.
 */
async function directTls(stream: StartupStream, ctx: ProxyContext, first: boolean, clientHello: Buffer) {
  if (!first) throw new UnansweredClose("a TLS handshake in the middle of the startup", "malformed_startup");
  if (!ctx.tls) throw new UnansweredClose("direct TLS, but TLS is not configured", "direct_tls_unavailable");
  const secure = await upgradeToTls(stream, ctx.tls, clientHello);
  if (secure.alpnProtocol !== POSTGRESQL_ALPN)
    throw new UnansweredClose("direct TLS without ALPN postgresql", "direct_tls_without_alpn");
}

function violation(message: string): StartupRefusal {
  return new StartupRefusal(SqlState.protocolViolation, message, "protocol");
}
