import type { Socket } from "node:net";

/** How long a refused client has to read its answer and close before its socket is destroyed. */
export const REFUSAL_LINGER_MS = 1000;

/**
 * What a refused client may still send while its answer drains. It is read and dropped, so that a client whose
 * writes crossed the refusal is not blocked before it reads the answer; a client that sends more is not listening,
 * and is cut off at once.
 */
export const REFUSAL_DISCARD_LIMIT = 64 * 1024;

/**
 * Ends a connection that will not be served: writes `answer` (a FATAL ErrorResponse, or nothing), ends the write
 * side, and destroys the socket when the client closes, when it sends more than {@link REFUSAL_DISCARD_LIMIT}, or
 * {@link REFUSAL_LINGER_MS} after the refusal, whichever comes first. Nothing the client sends is kept, so a client
 * that holds its side open and writes on costs neither memory nor a connection slot for longer than the linger.
 *
 * Warning: detach every other reader of `socket` first (`StartupStream.abandon`): a data listener left attached
 * would go on buffering whatever the client writes.
 */
export function closeRefused(socket: Socket, answer?: Buffer): void {
  if (socket.destroyed) return;
  const linger = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS);
  socket.once("close", () => clearTimeout(linger));
  let discarded = 0;
  socket.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > REFUSAL_DISCARD_LIMIT) socket.destroy();
  });
  socket.resume();
  if (answer) socket.end(answer);
  else socket.end();
}
