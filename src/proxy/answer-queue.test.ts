import { describe, expect, it } from "vitest";
import { AnswerQueue, type SimpleUnit } from "./answer-queue.js";

function simpleQuery(writes = false): SimpleUnit {
  return { kind: "simple", statements: [], index: 0, started: 0, writes, wrapped: false, failed: false };
}

/** Whether `promise` has settled by the time the queued callbacks ran. */
async function settled(promise: Promise<void>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("the answer queue", () => {
  it("closes the oldest simple query or Sync-terminated batch at each ReadyForQuery", () => {
    const queue = new AnswerQueue("I");
    const query = simpleQuery();
    queue.push({ kind: "execute", sql: "SELECT 1", started: 0, writes: false, portal: "", continued: false });
    queue.push({ kind: "sync" });
    queue.push(query);
    expect(queue.closeAtReady()).toBeUndefined();
    expect(queue.head).toBe(query);
    expect(queue.closeAtReady()).toBe(query);
    expect(queue.empty).toBe(true);
  });

  it("skips what an error makes the upstream skip: the rest of the batch, up to its Sync", () => {
    const queue = new AnswerQueue("I");
    queue.push({ kind: "execute", sql: "SELECT 1", started: 0, writes: false, portal: "", continued: false });
    queue.push({ kind: "execute", sql: "SELECT 2", started: 0, writes: true, portal: "", continued: false });
    queue.push({ kind: "sync" });
    expect(queue.mayWrite).toBe(true);
    queue.dropUntilSync();
    expect(queue.head).toEqual({ kind: "sync" });
    expect(queue.mayWrite).toBe(false);
  });

  it("holds the client's frames until the write it waits for, or the statement the proxy sent for it, is answered", async () => {
    const queue = new AnswerQueue("I");
    const write = simpleQuery(true);
    queue.push(write);
    const answered = queue.answeredLast();
    const drained = queue.drained();
    queue.closeAtReady();
    // The proxy commits the write: the client waits for the COMMIT too.
    queue.pushInjected({ kind: "injected", role: "end" });
    queue.releaseWaiters();
    expect(await settled(answered)).toBe(false);
    queue.shift();
    queue.releaseWaiters();
    expect(await settled(answered)).toBe(true);
    expect(await settled(drained)).toBe(true);
  });
});
