import { connect } from "node:net";

/**
 * Sends a protocol-level CancelRequest for backend `pid` to a PostgreSQL server: the way psql's Ctrl-C
 * cancels, needing no privileges and no free connection slot. Resolves when the server closed the socket
 * (or after `timeoutMs`); a cancel is best-effort by the protocol's design.
 */
export function sendCancelRequest(host: string, port: number, pid: number, secretKey: number, timeoutMs = 2000): Promise<void> {
  return new Promise((resolve) => {
    const packet = Buffer.alloc(16);
    packet.writeInt32BE(16, 0);
    packet.writeInt32BE(80877102, 4);
    packet.writeInt32BE(pid, 8);
    packet.writeInt32BE(secretKey, 12);
    const socket = connect({ host, port });
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    socket.once("connect", () => socket.write(packet));
    socket.once("error", done);
    socket.once("close", done);
  });
}
