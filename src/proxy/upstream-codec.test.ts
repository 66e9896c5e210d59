import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  dataRowByteLength,
  decodeAuthentication,
  decodeBackendKeyData,
  decodeCommandComplete,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  decodeRowDescription,
} from "./backend-messages.js";
import { type Frame, FrameReader } from "./frame-reader.js";
import { BackendCode } from "./message-codes.js";
import { md5Password, SCRAM_SHA_256, ScramSha256Client } from "./scram-client.js";
import * as encode from "./serializer.js";

/** Talks to the test cluster with nothing but this codec, over a plain TCP socket. */
class RawConnection {
  private readonly reader = new FrameReader();
  private readonly frames: Frame[] = [];
  private waiting: (() => void) | undefined;
  private closed = false;

  private constructor(readonly socket: Socket) {
    // Tiny chunks on purpose: every server message crosses chunk boundaries.
    socket.on("data", (data: Buffer) => {
      for (let i = 0; i < data.length; i += 7) {
        this.reader.feed(data.subarray(i, i + 7), (frame) => this.frames.push(frame));
      }
      this.waiting?.();
    });
    socket.on("close", () => {
      this.closed = true;
      this.waiting?.();
    });
  }

  static open(url: URL): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(Number(url.port || 5432), url.hostname, () =>
        resolve(new RawConnection(socket)),
      );
      socket.once("error", reject);
    });
  }

  async next(): Promise<Frame> {
    while (this.frames.length === 0) {
      if (this.closed) throw new Error("server closed the connection");
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
      });
    }
    return this.frames.shift()!;
  }

  /** Frames up to and including the next ReadyForQuery. */
  async untilReady(): Promise<Frame[]> {
    const frames: Frame[] = [];
    for (;;) {
      const frame = await this.next();
      frames.push(frame);
      if (frame.code === BackendCode.ReadyForQuery) return frames;
    }
  }

  /** Runs the startup and authentication exchange; returns the first frame that is not auth. */
  async authenticate(user: string, password: string): Promise<Frame> {
    this.socket.write(
      encode.encodeStartupMessage({ user, database: "postgres", application_name: "pgtoll-codec" }),
    );
    let scram: ScramSha256Client | undefined;
    for (;;) {
      const frame = await this.next();
      if (frame.code !== BackendCode.Authentication) return frame;
      const auth = decodeAuthentication(frame.payload);
      switch (auth.type) {
        case "sasl":
          expect(auth.mechanisms).toContain(SCRAM_SHA_256);
          scram = new ScramSha256Client(password);
          this.socket.write(encode.encodeSASLInitialResponse(SCRAM_SHA_256, scram.clientFirstMessage));
          break;
        case "saslContinue":
          this.socket.write(encode.encodeSASLResponse(await scram!.clientFinalMessage(auth.data)));
          break;
        case "saslFinal":
          scram!.verifyServerFinal(auth.data);
          break;
        case "md5Password":
          this.socket.write(encode.encodePasswordMessage(md5Password(user, password, auth.salt)));
          break;
        case "cleartextPassword":
          this.socket.write(encode.encodePasswordMessage(password));
          break;
        case "ok":
          break;
        default:
          throw new Error(`unexpected authentication ${auth.type}`);
      }
    }
  }

  close(): void {
    if (!this.closed) this.socket.end(encode.encodeTerminate());
  }
}

const url = new URL(inject("adminDatabaseUrl"));
const user = decodeURIComponent(url.username);
const password = decodeURIComponent(url.password);

describe("codec against a real PostgreSQL server", () => {
  let connection: RawConnection;
  let processId = 0;
  let secretKey: Buffer = Buffer.alloc(0);

  beforeAll(async () => {
    connection = await RawConnection.open(url);
    const first = await connection.authenticate(user, password);
    const frames = [
      first,
      ...(first.code === BackendCode.ReadyForQuery ? [] : await connection.untilReady()),
    ];
    const parameters = frames
      .filter((f) => f.code === BackendCode.ParameterStatus)
      .map((f) => decodeParameterStatus(f.payload));
    expect(parameters).toContainEqual({ name: "application_name", value: "pgtoll-codec" });
    const key = decodeBackendKeyData(frames.find((f) => f.code === BackendCode.BackendKeyData)!.payload);
    processId = key.processId;
    secretKey = key.secretKey;
    expect(decodeReadyForQuery(frames.at(-1)!.payload)).toBe("I");
  });

  afterAll(() => connection?.close());

  it("runs a multi-statement query and reads tags, rows and errors", async () => {
    connection.socket.write(
      encode.encodeQuery(
        "CREATE TEMP TABLE codec_t (a int, b text); INSERT INTO codec_t SELECT g, NULL FROM generate_series(1, 5) g; " +
          "SELECT a, 'é' || a AS b FROM codec_t ORDER BY a",
      ),
    );
    const frames = await connection.untilReady();
    const tags = frames
      .filter((f) => f.code === BackendCode.CommandComplete)
      .map((f) => decodeCommandComplete(f.payload));
    expect(tags.map(({ command, rows }) => ({ command, rows }))).toEqual([
      { command: "CREATE TABLE", rows: null },
      { command: "INSERT", rows: 5 },
      { command: "SELECT", rows: 5 },
    ]);
    const description = decodeRowDescription(
      frames.find((f) => f.code === BackendCode.RowDescription)!.payload,
    );
    expect(description.map((f) => [f.name, f.typeOid])).toEqual([
      ["a", 23],
      ["b", 25],
    ]);
    const rows = frames.filter((f) => f.code === BackendCode.DataRow);
    expect(rows).toHaveLength(5);
    // "1" + "é1" (3 bytes) for the first row.
    expect(dataRowByteLength(rows[0]!.payload)).toBe(1 + 3);

    connection.socket.write(encode.encodeQuery("SELECT 1/0"));
    const failed = await connection.untilReady();
    const error = decodeNoticeFields(failed.find((f) => f.code === BackendCode.ErrorResponse)!.payload);
    expect(error).toMatchObject({
      severityNonLocalized: "ERROR",
      code: "22012",
      message: "division by zero",
    });
    expect(decodeReadyForQuery(failed.at(-1)!.payload)).toBe("I");
  });

  it("cancels a running statement with CancelRequest", async () => {
    connection.socket.write(encode.encodeQuery("SELECT pg_sleep(30)"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const canceller = connect(Number(url.port || 5432), url.hostname);
    canceller.end(encode.encodeCancelRequest(processId, secretKey));
    const frames = await connection.untilReady();
    const error = decodeNoticeFields(frames.find((f) => f.code === BackendCode.ErrorResponse)!.payload);
    expect(error.code).toBe("57014");
  });

  it("gets 28P01 for a wrong password", async () => {
    const intruder = await RawConnection.open(url);
    const frame = await intruder.authenticate(user, `${password}-wrong`);
    expect(frame.code).toBe(BackendCode.ErrorResponse);
    expect(decodeNoticeFields(frame.payload)).toMatchObject({ severity: "FATAL", code: "28P01" });
    intruder.close();
  });
});
