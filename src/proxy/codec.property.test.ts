import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  dataRowByteLength,
  decodeAuthentication,
  decodeBackendKeyData,
  decodeCommandComplete,
  decodeCopyResponse,
  decodeDataRow,
  decodeNegotiateProtocolVersion,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  decodeRowDescription,
} from "./backend-messages.js";
import { FRONTEND_MAX_FRAME_LENGTH, FrameReader } from "./frame-reader.js";
import {
  decodeBind,
  decodeBindTarget,
  decodeFrontendMessage,
  decodeSASLInitialResponse,
  ProtocolViolationError,
} from "./frontend-messages.js";
import { parseStartupPacket, StartupReader } from "./startup-parser.js";

const FRONTEND_CODES = [..."QPBDECSHXdcfFp"].map((c) => c.charCodeAt(0));
const BACKEND_DECODERS = [
  dataRowByteLength,
  decodeAuthentication,
  decodeBackendKeyData,
  decodeCommandComplete,
  decodeCopyResponse,
  decodeDataRow,
  decodeNegotiateProtocolVersion,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  decodeRowDescription,
  decodeSASLInitialResponse,
];

/** Bodies biased toward the shapes decoders look for: NULs, small counts, -1 lengths. */
const body = fc.array(
  fc.oneof(
    fc.uint8Array({ maxLength: 12 }),
    fc.constantFrom(
      Uint8Array.of(0),
      Uint8Array.of(0, 1),
      Uint8Array.of(0, 2),
      Uint8Array.of(0xff, 0xff),
      Uint8Array.of(0xff, 0xff, 0xff, 0xff),
      Uint8Array.of(0, 0, 0, 3),
      Uint8Array.of(0x53),
      Uint8Array.of(0x50),
    ),
  ),
  { maxLength: 8 },
);

/** A message whose length word is right, off by a little, or arbitrary. */
const frameish = fc
  .tuple(
    fc.oneof(fc.constantFrom(...FRONTEND_CODES), fc.integer({ min: 0, max: 255 })),
    body,
    fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, fc.integer({ min: -6, max: 6 }), fc.integer()),
  )
  .map(([code, parts, skew]) => {
    const payload = Buffer.concat(parts);
    const header = Buffer.alloc(5);
    header[0] = code;
    const length = skew === 0 || Math.abs(skew) <= 6 ? payload.length + 4 + skew : skew;
    header.writeInt32BE(length | 0, 1);
    return Buffer.concat([header, payload]);
  });

const soup = fc.oneof(
  fc.array(frameish, { maxLength: 6 }).map((frames) => Buffer.concat(frames)),
  fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes)),
);

/** Splits `bytes` at the given (unsorted, possibly repeated) cut points. */
function chunk(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.subarray(start, point));
    start = point;
  }
  return chunks;
}

const onlyProtocolViolations = (run: () => void): void => {
  try {
    run();
  } catch (error) {
    if (!(error instanceof ProtocolViolationError)) throw error;
  }
};

const cuts = fc.array(fc.nat(), { maxLength: 10 });

const u16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const i32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};

/** Bind payloads: well formed, then perhaps cut short, lengthened or with a count or length off. */
const bindish = fc
  .record({
    portal: fc.string({ maxLength: 4 }),
    statement: fc.string({ maxLength: 4 }),
    formats: fc.array(fc.integer({ min: 0, max: 1 }), { maxLength: 3 }),
    params: fc.array(fc.option(fc.uint8Array({ maxLength: 6 })), { maxLength: 3 }),
    results: fc.array(fc.integer({ min: 0, max: 1 }), { maxLength: 3 }),
    damage: fc.oneof(
      fc.constant(null),
      fc.record({ at: fc.nat(), kind: fc.constantFrom("cut", "append", "flip") }),
    ),
  })
  .map(({ portal, statement, formats, params, results, damage }) => {
    const payload = Buffer.concat([
      Buffer.from(`${portal.replace(/\0/g, "")}\0${statement.replace(/\0/g, "")}\0`),
      u16(formats.length),
      ...formats.map(u16),
      u16(params.length),
      ...params.map((p) => (p === null ? i32(-1) : Buffer.concat([i32(p.length), p]))),
      u16(results.length),
      ...results.map(u16),
    ]);
    if (!damage) return payload;
    const at = damage.at % (payload.length + 1);
    if (damage.kind === "cut") return payload.subarray(0, at);
    if (damage.kind === "append") return Buffer.concat([payload, Buffer.from([0])]);
    const flipped = Buffer.from(payload);
    if (at < flipped.length) flipped[at] = 0xff;
    return flipped;
  });

describe("codec properties", () => {
  it("framer + frontend decoders throw nothing but ProtocolViolationError on any bytes, any chunking", () => {
    fc.assert(
      fc.property(soup, cuts, (bytes, cutPoints) => {
        const reader = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
        onlyProtocolViolations(() => {
          for (const piece of chunk(bytes, cutPoints)) {
            reader.feed(piece, (frame) =>
              onlyProtocolViolations(() => decodeFrontendMessage(frame.code, frame.payload)),
            );
          }
        });
      }),
      { numRuns: 400 },
    );
  });

  it("decodeBindTarget accepts exactly the Bind messages decodeBind accepts, with the same names", () => {
    const outcome = (decode: () => { portal: string; statement: string }) => {
      try {
        const { portal, statement } = decode();
        return { portal, statement };
      } catch (error) {
        if (!(error instanceof ProtocolViolationError)) throw error;
        return "refused";
      }
    };
    fc.assert(
      fc.property(
        fc.oneof(
          bindish,
          body.map((parts) => Buffer.concat(parts)),
        ),
        (payload) => {
          expect(outcome(() => decodeBindTarget(payload))).toEqual(outcome(() => decodeBind(payload)));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("backend decoders throw nothing but ProtocolViolationError on any payload", () => {
    fc.assert(
      fc.property(body, (parts) => {
        const payload = Buffer.concat(parts);
        for (const decode of BACKEND_DECODERS) onlyProtocolViolations(() => decode(payload));
      }),
      { numRuns: 400 },
    );
  });

  it("framing does not depend on how the stream is chunked", () => {
    fc.assert(
      fc.property(soup, cuts, (bytes, cutPoints) => {
        const run = (pieces: Buffer[]) => {
          const reader = new FrameReader();
          const frames: string[] = [];
          let failed = false;
          try {
            for (const piece of pieces) reader.feed(piece, (f) => frames.push(f.frame.toString("hex")));
          } catch (error) {
            if (!(error instanceof ProtocolViolationError)) throw error;
            failed = true;
          }
          return { frames, failed, buffered: failed ? 0 : reader.bufferedBytes };
        };
        expect(run(chunk(bytes, cutPoints))).toEqual(run([bytes]));
      }),
      { numRuns: 300 },
    );
  });

  it("the startup parser never throws and agrees with itself across chunkings", () => {
    const startupish = fc.oneof(
      soup,
      fc
        .tuple(
          fc.integer({ min: 0, max: 40 }),
          fc.constantFrom(196608, 196610, 80877102, 80877103, 80877104, 131072),
          body,
        )
        .map(([extra, code, parts]) => {
          const rest = Buffer.concat(parts);
          const head = Buffer.alloc(8);
          head.writeInt32BE(8 + Math.min(extra, rest.length), 0);
          head.writeInt32BE(code, 4);
          return Buffer.concat([head, rest]);
        }),
    );
    fc.assert(
      fc.property(startupish, cuts, (bytes, cutPoints) => {
        const whole = parseStartupPacket(bytes);
        const reader = new StartupReader();
        let result = reader.feed(Buffer.alloc(0));
        for (const piece of chunk(bytes, cutPoints)) {
          if (result.kind !== "incomplete") break;
          result = reader.feed(piece);
        }
        // `rest` differs by design: chunks after the verdict are not fed.
        const { rest: _a, ...streamed } = { rest: undefined, ...result };
        const { rest: _b, ...direct } = { rest: undefined, ...whole };
        expect(streamed).toEqual(direct);
      }),
      { numRuns: 400 },
    );
  });
});
