import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { InProcessSocket } from "./in-process-socket.js";

describe("InProcessSocket", () => {
  it("carries bytes both ways, in order", async () => {
    const [a, b] = InProcessSocket.pair();
    const fromA: Buffer[] = [];
    b.on("data", (chunk: Buffer) => fromA.push(chunk));
    a.write("one ");
    a.write(Buffer.from("two"));
    b.write("back");
    const [back] = await once(a, "data");
    await new Promise((resolve) => setImmediate(resolve));
    expect(Buffer.concat(fromA).toString()).toBe("one two");
    expect(back.toString()).toBe("back");
    a.destroy();
    b.destroy();
  });

  it("makes a writer wait while the other end does not read, and lets it go on once it does", async () => {
    const [writer, reader] = InProcessSocket.pair();
    reader.pause();
    const chunk = Buffer.alloc(64 * 1024, 1);
    let writes = 0;
    while (writer.write(chunk) && writes < 1000) writes++;
    // Stopped after a buffer's worth, not after everything was queued.
    expect(writes).toBeLessThan(4);
    expect(writer.writableNeedDrain).toBe(true);
    let read = 0;
    reader.on("data", (data: Buffer) => (read += data.length));
    const drained = once(writer, "drain");
    reader.resume();
    await drained;
    expect(read).toBeGreaterThan(0);
    writer.destroy();
  });

  it("ends the other end's reading when one end ends, and closes both when one is destroyed", async () => {
    const [a, b] = InProcessSocket.pair();
    b.resume();
    const ended = once(b, "end");
    a.end();
    await ended;
    const [c, d] = InProcessSocket.pair();
    const closed = once(d, "close");
    c.destroy();
    await closed;
    expect(d.destroyed).toBe(true);
    expect(d.write("late", () => {})).toBe(false);
  });
});
