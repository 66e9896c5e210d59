import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { encodeCommandComplete, encodeDataRow, encodeReadyForQuery } from "../proxy/serializer.js";
import { gatedMessages, OversizedMessageError } from "./message-gate.js";
import { ResultMemory, ResultMemoryFullError } from "./result-memory.js";

/** Writes `chunks` through a gate of `max` bytes; returns what passed and the error the stream was destroyed with. */
async function through(chunks: Buffer[], max: number, onData?: () => void) {
  const stream = new PassThrough();
  const gate = gatedMessages(stream, max);
  const passed: Buffer[] = [];
  gate.on("data", (chunk: Buffer) => {
    passed.push(chunk);
    onData?.();
  });
  const failed = new Promise<Error | undefined>((resolve) => {
    stream.on("error", resolve);
    stream.on("close", () => resolve(undefined));
  });
  for (const chunk of chunks) if (!stream.destroyed) stream.write(chunk);
  stream.end();
  return { passed: Buffer.concat(passed), error: await failed };
}

const small = [encodeDataRow(["a", "bb"]), encodeCommandComplete("SELECT 1"), encodeReadyForQuery("I")];
const large = encodeDataRow(["x".repeat(500)]);

describe("gatedMessages", () => {
  it("lets every message within the limit through, however the chunks split their headers", async () => {
    const bytes = Buffer.concat(small);
    for (let cut = 1; cut < bytes.length; cut++) {
      const { passed, error } = await through([bytes.subarray(0, cut), bytes.subarray(cut)], 100);
      expect(error).toBeUndefined();
      expect(passed.equals(bytes)).toBe(true);
    }
  });

  it("refuses a message above the limit from its header, before any chunk holding it passes", async () => {
    const bytes = Buffer.concat([small[0]!, large, ...small.slice(1)]);
    for (const cut of [small[0]!.length, small[0]!.length + 3, small[0]!.length + 5]) {
      const { passed, error } = await through([bytes.subarray(0, cut), bytes.subarray(cut)], 100);
      expect(error).toBeInstanceOf(OversizedMessageError);
      expect((error as OversizedMessageError).bytes).toBe(large.length - 5);
      expect(passed.length).toBeLessThanOrEqual(cut);
    }
  });

  it("ends the stream, not the process, when the parser throws", async () => {
    const { error } = await through([Buffer.concat(small)], 100, () => {
      throw new RangeError("Cannot create a string longer than 0x1fffffe8 characters");
    });
    expect(error).toBeInstanceOf(RangeError);
  });

  it("counts a large message in the result memory from its header to its last byte, and gives it back", () => {
    const memory = new ResultMemory(1024 * 1024);
    const stream = new PassThrough();
    const gate = gatedMessages(stream, 1024 * 1024, memory);
    const held: number[] = [];
    gate.on("data", () => held.push(memory.heldBytes));
    const row = encodeDataRow(["x".repeat(100_000)]);
    const bytes = Buffer.concat([small[0]!, row, ...small.slice(1)]);
    const cuts = [small[0]!.length + 2, small[0]!.length + 40_000, small[0]!.length + row.length + 3];
    let from = 0;
    for (const cut of [...cuts, bytes.length]) {
      stream.write(bytes.subarray(from, cut));
      from = cut;
    }
    // Small messages are not counted; the row is, while its chunks arrive, and not once it is whole.
    expect(held).toEqual([0, row.length - 5, 0, 0]);
    expect(memory.heldBytes).toBe(0);
  });

  it("ends the connection with ResultMemoryFullError when the process holds its most, and gives back what it took", async () => {
    const memory = new ResultMemory(150_000);
    expect(memory.take(100_000)).toBe(true);
    const stream = new PassThrough();
    const gate = gatedMessages(stream, 1024 * 1024, memory);
    gate.on("data", () => {});
    const failed = new Promise<Error>((resolve) => stream.on("error", resolve));
    stream.write(encodeDataRow(["x".repeat(100_000)]));
    const error = await failed;
    expect(error).toBeInstanceOf(ResultMemoryFullError);
    expect(memory.heldBytes).toBe(100_000);
  });
});
