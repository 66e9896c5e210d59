import { describe, expect, it } from "vitest";
import { KeptRows } from "./kept-rows.js";
import { encodeDataRow } from "./serializer.js";

function letters(frames: Buffer[]): string[] {
  return frames.map((frame) =>
    frame[0] === 0x43 ? `C:${frame.toString("latin1", 5, frame.length - 1)}` : String.fromCharCode(frame[0]!),
  );
}

describe("KeptRows", () => {
  it("ends the write's Execute suspended only when it returned the limit's rows", () => {
    const filled = new KeptRows(2);
    filled.relayed = 2;
    expect(filled.suspended).toBe(true);
    const short = new KeptRows(2);
    short.relayed = 1;
    expect(short.suspended).toBe(false);
  });

  it("answers the portal's next Executes as PostgreSQL does, and counts the bytes it keeps", () => {
    const kept = new KeptRows(1);
    kept.relayed = 1;
    kept.tag = "UPDATE 4";
    for (const id of ["2", "3", "4"]) kept.keep(encodeDataRow([id]));
    const bytes = kept.bytes;
    expect(bytes).toBe(3 * encodeDataRow(["2"]).length);

    const first = kept.take(2);
    expect(letters(first.frames)).toEqual(["D", "D", "s"]);
    expect(first.done).toBe(false);
    expect(kept.bytes).toBe(bytes / 3);

    const last = kept.take(2);
    expect(letters(last.frames)).toEqual(["D", "C:UPDATE 1"]);
    expect(last.done).toBe(true);
    expect(kept.bytes).toBe(0);
  });

  it("gives every row left to an Execute with no limit, and none once all were taken", () => {
    const kept = new KeptRows(1);
    kept.tag = "INSERT 0 3";
    kept.keep(encodeDataRow(["a"]));
    kept.keep(encodeDataRow(["b"]));
    expect(letters(kept.take(0).frames)).toEqual(["D", "D", "C:INSERT 0 2"]);
    expect(letters(kept.take(5).frames)).toEqual(["C:INSERT 0 0"]);
  });
});
