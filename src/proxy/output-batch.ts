import type { Socket } from "node:net";

/**
 * Collects frames bound for one socket during one pass over a chunk and writes them with as few writes as
 * possible: consecutive frames of the same received chunk are kept as one range of it and written as one
 * view (relayed bytes are not copied, and no view is made per frame).
 */
export class OutputBatch {
  readonly #buffers: Buffer[] = [];
  readonly #starts: number[] = [];
  readonly #ends: number[] = [];

  /** Queues `buffer[start, end)`. */
  pushRange(buffer: Buffer, start: number, end: number): void {
    const last = this.#buffers.length - 1;
    if (last >= 0 && this.#buffers[last] === buffer && this.#ends[last] === start) {
      this.#ends[last] = end;
      return;
    }
    this.#buffers.push(buffer);
    this.#starts.push(start);
    this.#ends.push(end);
  }

  /** Queues a whole buffer. */
  push(buffer: Buffer): void {
    this.pushRange(buffer, 0, buffer.length);
  }

  get empty(): boolean {
    return this.#buffers.length === 0;
  }

  /** Writes everything collected; returns false when the socket asked to wait for 'drain'. */
  flushTo(socket: Socket): boolean {
    const count = this.#buffers.length;
    if (count === 0) return true;
    if (count === 1) {
      const buffer = this.#buffers[0]!;
      const start = this.#starts[0]!;
      const end = this.#ends[0]!;
      this.#clear();
      if (socket.destroyed) return true;
      return socket.write(start === 0 && end === buffer.length ? buffer : buffer.subarray(start, end));
    }
    const views = this.#buffers.map((buffer, i) => buffer.subarray(this.#starts[i], this.#ends[i]));
    this.#clear();
    if (socket.destroyed) return true;
    socket.cork();
    let ok = true;
    for (const view of views) ok = socket.write(view) && ok;
    process.nextTick(() => socket.uncork());
    return ok;
  }

  #clear(): void {
    this.#buffers.length = 0;
    this.#starts.length = 0;
    this.#ends.length = 0;
  }
}
