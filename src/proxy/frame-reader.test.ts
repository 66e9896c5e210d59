import { describe, expect, it } from "vitest";
import {
  FRONTEND_MAX_FRAME_LENGTH,
  type Frame,
  FrameBatch,
  FrameReader,
  ROW_HEADER,
  ROW_PIECE,
} from "./frame-reader.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";
import {
  encodeCommandComplete,
  encodeDataRow,
  encodeQuery,
  encodeReadyForQuery,
  encodeSync,
} from "./serializer.js";

interface Seen {
  code: string;
  payload: string;
  frame: string;
}

function feedAll(reader: FrameReader, chunks: Buffer[]): Seen[] {
  const seen: Seen[] = [];
  const onFrame = (f: Frame) =>
    seen.push({
      code: String.fromCharCode(f.code),
      payload: f.payload.toString("hex"),
      frame: f.frame.toString("hex"),
    });
  for (const chunk of chunks) reader.feed(chunk, onFrame);
  return seen;
}

const messages = [
  encodeQuery("SELECT 1"),
  encodeSync(),
  encodeDataRow(["a", null, "ccc"]),
  encodeCommandComplete("SELECT 1"),
  encodeReadyForQuery("I"),
];
const stream = Buffer.concat(messages);
const expected = messages.map((m) => ({
  code: String.fromCharCode(m[0]!),
  payload: m.subarray(5).toString("hex"),
  frame: m.toString("hex"),
}));

describe("FrameReader", () => {
  it("yields every message of one chunk, as views of it", () => {
    const frames: Frame[] = [];
    new FrameReader().feed(stream, (f) => frames.push(f));
    expect(frames.map((f) => f.frame.toString("hex"))).toEqual(messages.map((m) => m.toString("hex")));
    expect(frames[0]!.frame.buffer).toBe(stream.buffer);
    expect(frames[0]!.payload.buffer).toBe(stream.buffer);
  });

  it("reassembles each message split at its front, middle and end", () => {
    for (const message of messages) {
      for (const cut of [1, 2, 4, 5, Math.floor(message.length / 2), message.length - 1]) {
        if (cut <= 0 || cut >= message.length) continue;
        const reader = new FrameReader();
        const seen = feedAll(reader, [message.subarray(0, cut), message.subarray(cut)]);
        expect(seen).toHaveLength(1);
        expect(seen[0]!.frame).toBe(message.toString("hex"));
        expect(reader.bufferedBytes).toBe(0);
      }
    }
  });

  it("reassembles a stream fed byte by byte", () => {
    const reader = new FrameReader();
    const chunks = [...stream].map((byte) => Buffer.from([byte]));
    expect(feedAll(reader, chunks)).toEqual(expected);
    expect(reader.bufferedBytes).toBe(0);
  });

  it("reassembles a stream cut at every possible position, including mid-header", () => {
    for (let cut = 1; cut < stream.length; cut++) {
      expect(feedAll(new FrameReader(), [stream.subarray(0, cut), stream.subarray(cut)])).toEqual(expected);
    }
  });

  it("handles frames spanning three chunks and empty chunks", () => {
    const row = encodeDataRow(["x".repeat(100)]);
    const chunks = [row.subarray(0, 3), Buffer.alloc(0), row.subarray(3, 50), row.subarray(50), encodeSync()];
    const reader = new FrameReader();
    const seen = feedAll(reader, chunks);
    expect(seen.map((s) => s.frame)).toEqual([row.toString("hex"), encodeSync().toString("hex")]);
  });

  it("keeps the bytes of an incomplete frame and reports them", () => {
    const reader = new FrameReader();
    expect(feedAll(reader, [stream.subarray(0, 7)])).toEqual([]);
    expect(reader.bufferedBytes).toBe(7);
  });

  it.each([0, 3, -1, -2147483648])("rejects length %d as a protocol violation", (length) => {
    const header = Buffer.alloc(5);
    header[0] = 0x51;
    header.writeInt32BE(length, 1);
    const reader = new FrameReader();
    expect(() => feedAll(reader, [header])).toThrow(ProtocolViolationError);
    // Failed for good: the stream cannot be resynchronised.
    expect(() => feedAll(reader, [encodeSync()])).toThrow(ProtocolViolationError);
  });

  it("rejects a huge length at once, without waiting for the body", () => {
    const header = Buffer.from([0x51, 0x7f, 0xff, 0xff, 0xff]);
    const reader = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
    expect(() => feedAll(reader, [header.subarray(0, 2), header.subarray(2)])).toThrow(/exceeds the limit/);
  });

  it("applies the configured limit exactly", () => {
    const atLimit = Buffer.concat([Buffer.from([0x64, 0, 0, 0, 14]), Buffer.alloc(10)]);
    expect(feedAll(new FrameReader({ maxFrameLength: 14 }), [atLimit])).toHaveLength(1);
    expect(() => feedAll(new FrameReader({ maxFrameLength: 13 }), [atLimit])).toThrow(ProtocolViolationError);
  });

  it("appends frames to a batch as positions in the chunks, a straddling one as its own buffer", () => {
    const batch = new FrameBatch();
    const reader = new FrameReader();
    const cut = messages[0]!.length + 3; // inside the second message
    const first = stream.subarray(0, cut);
    const second = stream.subarray(cut);
    reader.feedInto(first, batch);
    reader.feedInto(second, batch);
    const seen = Array.from({ length: batch.length }, (_, i) =>
      batch.buffers[i]!.subarray(batch.starts[i], batch.ends[i]).toString("hex"),
    );
    expect(seen).toEqual(messages.map((m) => m.toString("hex")));
    expect(batch.codes.slice(0, batch.length)).toEqual(messages.map((m) => m[0]));
    expect(batch.buffers[0]).toBe(first);
    expect(batch.buffers[2]).toBe(second);
    batch.clear();
    expect([batch.length, batch.head, batch.buffers[0]]).toEqual([0, 0, undefined]);
  });

  describe("with dataRowRuns", () => {
    const rows = Array.from({ length: 50 }, (_, i) =>
      encodeDataRow([String(i), i % 7 === 0 ? null : "x".repeat(i)]),
    );
    const result = [...rows, encodeCommandComplete("SELECT 50"), encodeReadyForQuery("I")];
    const resultStream = Buffer.concat(result);

    /** Every message the batch holds, runs walked message by message, as [type letter, hex]. */
    function messagesOf(batch: FrameBatch): [string, string][] {
      const out: [string, string][] = [];
      for (let i = 0; i < batch.length; i++) {
        const buffer = batch.buffers[i]!;
        let at = batch.starts[i]!;
        for (let n = 0; n < batch.rows[i]!; n++) {
          const end = at + 1 + buffer.readInt32BE(at + 1);
          out.push([String.fromCharCode(buffer[at]!), buffer.subarray(at, end).toString("hex")]);
          at = end;
        }
        expect(at).toBe(batch.ends[i]);
      }
      return out;
    }
    const expectedMessages = result.map((m) => [String.fromCharCode(m[0]!), m.toString("hex")]);

    it("appends back-to-back DataRows of a chunk as one run", () => {
      const batch = new FrameBatch();
      new FrameReader({ dataRowRuns: true }).feedInto(resultStream, batch);
      expect(batch.length).toBe(3);
      expect(batch.rows.slice(0, 3)).toEqual([50, 1, 1]);
      expect(messagesOf(batch)).toEqual(expectedMessages);
    });

    it("keeps every message, in order, whatever the chunks: cut at the front, middle and end of rows", () => {
      for (let cut = 1; cut < resultStream.length; cut += 7) {
        for (const second of [cut + 1, cut + 40, resultStream.length]) {
          const batch = new FrameBatch();
          const reader = new FrameReader({ dataRowRuns: true });
          for (const [from, to] of [
            [0, cut],
            [cut, second],
            [second, resultStream.length],
          ] as const)
            reader.feedInto(resultStream.subarray(from, Math.min(to, resultStream.length)), batch);
          expect(messagesOf(batch)).toEqual(expectedMessages);
        }
      }
    });

    it("shifts messages off the front of a run", () => {
      const batch = new FrameBatch();
      new FrameReader({ dataRowRuns: true }).feedInto(resultStream, batch);
      expect(batch.shiftMessage(0)).toBe(rows[0]!.length);
      expect(batch.shiftMessages(0, 3)).toBe(
        rows[0]!.length + rows[1]!.length + rows[2]!.length + rows[3]!.length,
      );
      expect(batch.rows[0]).toBe(46);
      expect(messagesOf(batch)).toEqual(expectedMessages.slice(4));
    });

    it("rejects a bad length word inside a run, as outside one", () => {
      const bad = Buffer.concat([rows[0]!, rows[1]!]);
      bad.writeInt32BE(2, rows[0]!.length + 1);
      expect(() => new FrameReader({ dataRowRuns: true }).feedInto(bad, new FrameBatch())).toThrow(
        ProtocolViolationError,
      );
    });

    it("leaves a client's 'D' (Describe) alone without the option", () => {
      const batch = new FrameBatch();
      new FrameReader().feedInto(Buffer.concat([rows[0]!, rows[1]!]), batch);
      expect(batch.rows.slice(0, batch.length)).toEqual([1, 1]);
    });
  });
});

describe("FrameReader with admitRowsAbove", () => {
  const small = encodeDataRow(["a"]);
  const large = encodeDataRow(["x".repeat(1000)]);
  const after = [encodeCommandComplete("SELECT 2"), encodeReadyForQuery("I")];
  const result = Buffer.concat([small, large, ...after]);

  /** Feeds `chunks`, deciding each large row's header with `decide`; returns the entries as type letters (H: a header). */
  function read(
    chunks: Buffer[],
    decide: "admit" | "skip" | "stream",
  ): { codes: string[]; lengths: number[]; reader: FrameReader; streamed: Buffer } {
    const reader = new FrameReader({ dataRowRuns: true, admitRowsAbove: 100 });
    const batch = new FrameBatch();
    const codes: string[] = [];
    const lengths: number[] = [];
    const pieces: Buffer[] = [];
    const drain = () => {
      while (batch.head < batch.length) {
        const at = batch.head++;
        const code = batch.codes[at]!;
        lengths.push(batch.ends[at]! - batch.starts[at]!);
        if (code === ROW_PIECE) {
          // A piece is a view of the chunk: copied, as the relay writes it out before the chunk is reused.
          pieces.push(Buffer.from(batch.buffers[at]!.subarray(batch.starts[at]!, batch.ends[at]!)));
          if (codes.at(-1) !== "P") codes.push("P");
        } else if (code >= ROW_HEADER) {
          codes.push("H");
          if (decide === "admit") reader.admitRow(batch);
          else if (decide === "stream") reader.streamRow(batch);
          else reader.skipRow(batch);
        } else codes.push(String.fromCharCode(code).repeat(batch.rows[at]!));
      }
      batch.clear();
    };
    for (const chunk of chunks) {
      reader.feedInto(chunk, batch);
      drain();
    }
    return { codes, lengths, reader, streamed: Buffer.concat(pieces) };
  }

  const splits = (bytes: Buffer) =>
    [1, 3, small.length + 2, small.length + 5, small.length + 500, bytes.length - 3].map((cut) => [
      bytes.subarray(0, cut),
      bytes.subarray(cut),
    ]);

  it("hands out a large row's header before its body, in one chunk or split anywhere", () => {
    for (const chunks of [[result], ...splits(result)]) {
      const { codes, lengths } = read(chunks, "admit");
      expect(codes).toEqual(["D", "H", "D", "C", "Z"]);
      expect(lengths.slice(1, 3)).toEqual([5, large.length]);
    }
  });

  it("skips a refused row's bytes as they arrive, never holding them, and frames what follows", () => {
    for (const chunks of [[result], ...splits(result)]) {
      const { codes, reader } = read(chunks, "skip");
      expect(codes).toEqual(["D", "H", "C", "Z"]);
      expect(reader.skippedBytes).toBe(large.length);
      expect(reader.bufferedBytes).toBe(0);
    }
    // Byte by byte: nothing of the skipped row is ever buffered.
    const reader = new FrameReader({ admitRowsAbove: 100 });
    const batch = new FrameBatch();
    let most = 0;
    for (let i = 0; i < result.length; i++) {
      reader.feedInto(result.subarray(i, i + 1), batch);
      for (; batch.head < batch.length; batch.head++)
        if (batch.codes[batch.head]! >= ROW_HEADER) reader.skipRow(batch);
      most = Math.max(most, reader.bufferedBytes);
    }
    expect(most).toBeLessThan(100);
    expect(reader.skippedBytes).toBe(large.length);
  });

  it("streams an admitted row's bytes through as they arrive, header first, and frames what follows", () => {
    for (const chunks of [[result], ...splits(result)]) {
      const { codes, reader, streamed } = read(chunks, "stream");
      expect(codes).toEqual(["D", "H", "P", "C", "Z"]);
      expect(streamed.equals(large)).toBe(true);
      expect(reader.bufferedBytes).toBe(0);
    }
    // Byte by byte: the row is never held, yet every byte of it is handed out in order.
    const { codes, streamed } = read(
      [...result].map((byte) => Buffer.of(byte)),
      "stream",
    );
    expect(codes).toEqual(["D", "H", "P", "C", "Z"]);
    expect(streamed.equals(large)).toBe(true);
  });

  it("parks what arrives before the decision, unread", () => {
    const reader = new FrameReader({ admitRowsAbove: 100 });
    const batch = new FrameBatch();
    reader.feedInto(Buffer.concat([small, large.subarray(0, 10)]), batch);
    expect(batch.length).toBe(2);
    reader.feedInto(large.subarray(10), batch);
    reader.feedInto(Buffer.concat(after), batch);
    expect(batch.length).toBe(2);
    reader.skipRow(batch);
    expect(batch.codes.slice(2, batch.length).map((code) => String.fromCharCode(code))).toEqual(["C", "Z"]);
  });

  it("refuses any other message above maxOtherFrameLength, from its header", () => {
    const reader = new FrameReader({ maxOtherFrameLength: 100 });
    const notice = encodeCommandComplete("x".repeat(200));
    expect(() => reader.feedInto(notice.subarray(0, 5), new FrameBatch())).toThrow(ProtocolViolationError);
    expect(() =>
      new FrameReader({ maxOtherFrameLength: 100 }).feedInto(large, new FrameBatch()),
    ).not.toThrow();
  });

  it("assembles a large row in one buffer of its size as it arrives, split anywhere, header included", () => {
    const big = encodeDataRow(["y".repeat(200_000)]);
    const admittedRow = encodeDataRow(["z".repeat(2_000_000)]);
    const bytes = Buffer.concat([small, big, admittedRow, ...after]);
    const reader = new FrameReader({ admitRowsAbove: 1_000_000 });
    const batch = new FrameBatch();
    const frames: string[] = [];
    for (const size of [3, 65_536, 100_000, 1_000_003]) {
      frames.length = 0;
      for (let at = 0; at < bytes.length; at += size) {
        reader.feedInto(bytes.subarray(at, at + size), batch);
        for (; batch.head < batch.length; batch.head++) {
          const entry = batch.head;
          if (batch.codes[entry]! >= ROW_HEADER) reader.admitRow(batch);
          else
            frames.push(
              batch.buffers[entry]!.subarray(batch.starts[entry], batch.ends[entry]).toString("hex"),
            );
        }
        batch.clear();
      }
      expect(frames).toEqual([small, big, admittedRow, ...after].map((message) => message.toString("hex")));
      expect(reader.bufferedBytes).toBe(0);
    }
  });
});
