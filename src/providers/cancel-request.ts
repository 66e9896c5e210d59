import { connect } from "node:net";
import { encodeCancelRequest } from "../proxy/serializer.js";

/**
 * Sends a protocol-level CancelRequest for backend `pid` to a PostgreSQL server: the way psql's Ctrl-C
 * cancels, needing no privileges and no free connection slot. Resolves when the server closed the socket
 * (or after `timeoutMs`); a cancel is best-effort by the protocol's design.
 */
export function sendCancelRequest(
  host: string,
  port: number,
  pid: number,
  secretKey: number | Uint8Array,
  timeoutMs = 2000,
): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    socket.once("connect", () => socket.write(encodeCancelRequest(pid, secretKey)));
    socket.once("error", done);
    socket.once("close", done);
  });
}
