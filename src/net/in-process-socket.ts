import { Duplex } from "node:stream";

/**
 * One end of a connection within this process: what one end writes, the other reads, with backpressure (a write
 * waits for the other end to read once its buffer is full), end and close carried across, and no copy or system
 * call. It has the parts of `net.Socket` that a PostgreSQL driver and the proxy's session use (`connect`,
 * `setNoDelay`, `setKeepAlive`, `ref`, `unref`), as no-ops.
 */
export class InProcessSocket extends Duplex {
  #peer!: InProcessSocket;
  /** The write waiting for the peer to read: called once it does. */
  #pendingWrite: (() => void) | null = null;

  /** Connects two ends: what is written to one is read from the other. */
  static pair(): [InProcessSocket, InProcessSocket] {
    const a = new InProcessSocket();
    const b = new InProcessSocket();
    a.#peer = b;
    b.#peer = a;
    return [a, b];
  }

  private constructor() {
    super({ allowHalfOpen: false });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const peer = this.#peer;
    if (peer.destroyed) callback(new Error("the other end of the in-process connection is closed"));
    else if (peer.push(chunk)) callback();
    else peer.#pendingWrite = () => callback();
  }

  override _read(): void {
    const pending = this.#pendingWrite;
    if (pending) {
      this.#pendingWrite = null;
      pending();
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.#peer.destroyed) this.#peer.push(null);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A socket's close is seen by both ends.
    const peer = this.#peer;
    if (!peer.destroyed) process.nextTick(() => peer.destroy());
    const pending = this.#pendingWrite;
    this.#pendingWrite = null;
    pending?.();
    callback(error);
  }

  /** As `net.Socket.connect`: the connection exists already, so it is reported connected on the next tick. */
  connect(): this {
    process.nextTick(() => this.emit("connect"));
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  ref(): this {
    return this;
  }

  unref(): this {
    return this;
  }
}
