import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { OutputBatch } from "./output-batch.js";

/** A socket that records what is written to it, as one string per flush. */
function recordingSocket(): { socket: Socket; written: string[] } {
  const written: string[] = [];
  let corked: string[] | null = null;
  const socket = {
    destroyed: false,
    write(chunk: Buffer) {
      if (corked) corked.push(chunk.toString());
      else written.push(chunk.toString());
      return true;
    },
    cork() {
      corked = [];
    },
    uncork() {
      if (corked) written.push(corked.join(""));
      corked = null;
    },
  } as unknown as Socket;
  return { socket, written };
}

/** A promise and the functions that settle it. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("OutputBatch", () => {
  it("writes consecutive ranges of one chunk as one view", async () => {
    const { socket, written } = recordingSocket();
    const batch = new OutputBatch();
    const chunk = Buffer.from("abcdef");
    batch.pushRange(chunk, 0, 2);
    batch.pushRange(chunk, 2, 4);
    batch.push(Buffer.from("X"));
    expect(batch.flushTo(socket)).toBe(true);
    await settle();
    expect(written).toEqual(["abcdX"]);
    expect(batch.empty).toBe(true);
  });

  it("holds what is pushed after a hold until it settles, writes what it resolves to first, and the rest in order", async () => {
    const { socket, written } = recordingSocket();
    const batch = new OutputBatch();
    const chunk = Buffer.from("rows|ready|next");
    const first = deferred<Buffer | undefined>();
    const second = deferred<Buffer | undefined>();
    let settled = 0;
    batch.pushRange(chunk, 0, 5);
    batch.holdUntil(first.promise, () => settled++);
    // Adjacent in the chunk, but after the hold: not merged into the range before it.
    batch.pushRange(chunk, 5, 11);
    batch.holdUntil(second.promise, () => settled++);
    batch.pushRange(chunk, 11, 15);
    batch.flushTo(socket);
    await settle();
    expect(written.join("")).toBe("rows|");
    // What waits behind the first hold, once what came before it is written.
    expect(batch.heldBytes).toBe(10);
    expect(batch.released()).toBeInstanceOf(Promise);
    // The second settles first: nothing of it goes out before the first.
    second.resolve(undefined);
    await settle();
    batch.flushTo(socket);
    await settle();
    expect(written.join("")).toBe("rows|");
    first.resolve(Buffer.from("E|"));
    await settle();
    expect(settled).toBe(2);
    expect(batch.released()).toBeUndefined();
    batch.flushTo(socket);
    await settle();
    expect(written.join("")).toBe("rows|E|ready|next");
    expect(batch.heldBytes).toBe(0);
    expect(batch.empty).toBe(true);
  });

  it("lets the held frames go when the hold fails", async () => {
    const { socket, written } = recordingSocket();
    const batch = new OutputBatch();
    const hold = deferred<Buffer | undefined>();
    batch.holdUntil(hold.promise, () => {});
    batch.push(Buffer.from("ready"));
    batch.flushTo(socket);
    hold.reject(new Error("ledger"));
    await settle();
    batch.flushTo(socket);
    await settle();
    expect(written.join("")).toBe("ready");
  });
});
