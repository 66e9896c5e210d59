import type { Socket } from "node:net";

/** A point in the output after which frames wait for `until`; what it resolves to is written there first. */
interface Hold {
  /** Index of the first entry the hold keeps back. */
  at: number;
  settled: boolean;
  insert: Buffer | undefined;
  until: Promise<unknown>;
}

/**
 * Collects frames bound for one socket during one pass over a chunk and writes them with as few writes as
 * possible: consecutive frames of the same received chunk are kept as one range of it and written as one
 * view (relayed bytes are not copied, and no view is made per frame).
 *
 * Frames may be held back (`holdUntil`): those pushed after a hold are written once it settles, in order, while
 * the frames before it go at once. The buffers they view must then stay unchanged until they are written, as
 * the sockets' own chunks do.
 */
export class OutputBatch {
  readonly #buffers: Buffer[] = [];
  readonly #starts: number[] = [];
  readonly #ends: number[] = [];
  readonly #holds: Hold[] = [];
  /** Bytes of every frame queued and not written. */
  #queuedBytes = 0;

  /** Queues `buffer[start, end)`. */
  pushRange(buffer: Buffer, start: number, end: number): void {
    this.#queuedBytes += end - start;
    const last = this.#buffers.length - 1;
    const heldFromHere = this.#holds.length > 0 && this.#holds[this.#holds.length - 1]!.at === last + 1;
    if (last >= 0 && !heldFromHere && this.#buffers[last] === buffer && this.#ends[last] === start) {
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
    return this.#buffers.length === 0 && this.#holds.length === 0;
  }

  /**
   * Holds back the frames pushed from now on until `until` settles; the frame it resolves to, if any, is written
   * first. `onSettled` is told then (flush again). A rejected `until` lets the frames go as a resolved one would.
   */
  holdUntil(until: Promise<Buffer | undefined>, onSettled: () => void): void {
    const hold: Hold = { at: this.#buffers.length, settled: false, insert: undefined, until };
    hold.until = until.then(
      (insert) => {
        hold.settled = true;
        hold.insert = insert;
        onSettled();
      },
      () => {
        hold.settled = true;
        onSettled();
      },
    );
    this.#holds.push(hold);
  }

  /** Resolves once every hold so far has settled (its frames may then be written); undefined when none is open. */
  released(): Promise<void> | undefined {
    const open = this.#holds.filter((hold) => !hold.settled);
    if (open.length === 0) return undefined;
    return Promise.all(open.map((hold) => hold.until)).then(() => {});
  }

  /**
   * Bytes queued behind a hold that has not settled, as of the last flush (which wrote everything before it):
   * counted as frames are queued, not per call.
   */
  get heldBytes(): number {
    return this.#holds.some((hold) => !hold.settled) ? this.#queuedBytes : 0;
  }

  /** Writes everything collected up to the first hold not settled; false when the socket asked to wait for 'drain'. */
  flushTo(socket: Socket): boolean {
    const count = this.#buffers.length;
    if (this.#holds.length > 0) return this.#flushHeld(socket);
    if (count === 0) return true;
    if (count === 1) {
      const buffer = this.#buffers[0]!;
      const start = this.#starts[0]!;
      const end = this.#ends[0]!;
      this.#clear();
      this.#queuedBytes = 0;
      if (socket.destroyed) return true;
      return socket.write(start === 0 && end === buffer.length ? buffer : buffer.subarray(start, end));
    }
    const views = this.#buffers.map((buffer, i) => buffer.subarray(this.#starts[i], this.#ends[i]));
    this.#clear();
    this.#queuedBytes = 0;
    return writeViews(socket, views);
  }

  #flushHeld(socket: Socket): boolean {
    const views: Buffer[] = [];
    let next = 0;
    let passed = 0;
    let limit = this.#buffers.length;
    for (const hold of this.#holds) {
      if (!hold.settled) {
        limit = hold.at;
        break;
      }
      for (; next < hold.at; next++) views.push(this.#view(next));
      if (hold.insert) views.push(hold.insert);
      passed++;
    }
    for (; next < limit; next++) views.push(this.#view(next));
    for (let i = 0; i < limit; i++) this.#queuedBytes -= this.#ends[i]! - this.#starts[i]!;
    this.#holds.splice(0, passed);
    for (const hold of this.#holds) hold.at -= limit;
    this.#buffers.splice(0, limit);
    this.#starts.splice(0, limit);
    this.#ends.splice(0, limit);
    if (views.length === 0) return true;
    return writeViews(socket, views);
  }

  #view(i: number): Buffer {
    return this.#buffers[i]!.subarray(this.#starts[i], this.#ends[i]);
  }

  #clear(): void {
    this.#buffers.length = 0;
    this.#starts.length = 0;
    this.#ends.length = 0;
  }
}

function writeViews(socket: Socket, views: Buffer[]): boolean {
  if (socket.destroyed) return true;
  if (views.length === 1) return socket.write(views[0]!);
  socket.cork();
  let ok = true;
  for (const view of views) ok = socket.write(view) && ok;
  process.nextTick(() => socket.uncork());
  return ok;
}
