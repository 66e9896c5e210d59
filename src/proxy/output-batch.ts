import type { Socket } from "node:net";

/**
 * Collects frames bound for one socket during one pass over a chunk and writes them with as few writes as
 * possible: consecutive views of the same received chunk are merged back into one slice (relayed bytes are
 * not copied).
 */
export class OutputBatch {
  #parts: Buffer[] = [];

  push(buffer: Buffer): void {
    const last = this.#parts[this.#parts.length - 1];
    if (last && last.buffer === buffer.buffer && last.byteOffset + last.length === buffer.byteOffset) {
      this.#parts[this.#parts.length - 1] = Buffer.from(
        last.buffer,
        last.byteOffset,
        last.length + buffer.length,
      );
      return;
    }
    this.#parts.push(buffer);
  }

  get empty(): boolean {
    return this.#parts.length === 0;
  }

  /** Writes everything collected; returns false when the socket asked to wait for 'drain'. */
  flushTo(socket: Socket): boolean {
    const parts = this.#parts;
    if (parts.length === 0) return true;
    this.#parts = [];
    if (socket.destroyed) return true;
    if (parts.length === 1) return socket.write(parts[0]!);
    socket.cork();
    let ok = true;
    for (const part of parts) ok = socket.write(part) && ok;
    process.nextTick(() => socket.uncork());
    return ok;
  }
}
