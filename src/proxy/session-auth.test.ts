import { connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FrontendCode } from "./message-codes.js";
import { StartupRefusal } from "./proxy-errors.js";
import { SCRAM_SHA_256, ScramSha256Client } from "./scram-client.js";
import {
  encodeFrame,
  encodePasswordMessage,
  encodeQuery,
  encodeSASLInitialResponse,
  encodeSASLResponse,
} from "./serializer.js";
import {
  authenticateWithScram,
  MAX_PASSWORD_LENGTH,
  MAX_SASL_MESSAGE_LENGTH,
  readCleartextPassword,
} from "./session-auth.js";
import { StartupStream } from "./startup-stream.js";

/** Authentication messages over a real loopback connection: the proxy's side reads them with a StartupStream. */
let server: Server;
let acceptNext: (socket: Socket) => void;
const sockets: Socket[] = [];

beforeAll(async () => {
  server = createServer((socket) => {
    socket.on("error", () => {});
    sockets.push(socket);
    acceptNext(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

/** A connection whose proxy side has read its StartupMessage: the stream now expects authentication messages. */
async function connection(): Promise<{ stream: StartupStream; client: Socket; received: Buffer[] }> {
  const accepted = new Promise<Socket>((resolve) => (acceptNext = resolve));
  const client = connect((server.address() as { port: number }).port, "127.0.0.1");
  client.on("error", () => {});
  const received: Buffer[] = [];
  client.on("data", (chunk: Buffer) => received.push(chunk));
  const stream = new StartupStream(await accepted);
  stream.startMessages(Buffer.alloc(0));
  return { stream, client, received };
}

/** A message's 5-byte header announcing a body of `bodyLength` bytes, and nothing of the body. */
function header(code: number, bodyLength: number): Buffer {
  const bytes = Buffer.alloc(5);
  bytes[0] = code;
  bytes.writeInt32BE(bodyLength + 4, 1);
  return bytes;
}

async function refusal(promise: Promise<unknown>): Promise<StartupRefusal> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(StartupRefusal);
  return error as StartupRefusal;
}

describe("readCleartextPassword", () => {
  it(`takes a password of ${MAX_PASSWORD_LENGTH} bytes`, async () => {
    const { stream, client } = await connection();
    const password = "p".repeat(MAX_PASSWORD_LENGTH);
    client.write(encodePasswordMessage(password));
    expect(await readCleartextPassword(stream)).toBe(password);
    client.destroy();
  });

  it("refuses a longer one from its header, before the body arrives", async () => {
    const { stream, client } = await connection();
    client.write(header(FrontendCode.PasswordMessage, MAX_PASSWORD_LENGTH + 2));
    const refused = await refusal(readCleartextPassword(stream));
    expect(refused).toMatchObject({
      sqlState: "08P01",
      message: "password message of 1002 bytes exceeds the limit of 1001",
    });
    client.destroy();
  });

  it("refuses another message type from its header", async () => {
    const { stream, client } = await connection();
    client.write(encodeQuery("SELECT 1").subarray(0, 5));
    const refused = await refusal(readCleartextPassword(stream));
    expect(refused.message).toBe('expected password message, got message type "Q"');
    client.destroy();
  });

  it("reads nothing past the password message until the next read", async () => {
    const { stream, client } = await connection();
    client.write(
      Buffer.concat([
        encodePasswordMessage("secret"),
        encodeFrame(FrontendCode.Query, Buffer.alloc(1 << 20)),
      ]),
    );
    expect(await readCleartextPassword(stream)).toBe("secret");
    await new Promise((r) => setTimeout(r, 100));
    // The rest of the query is left in the kernel's buffers and the socket's own, not taken in by the proxy.
    expect(stream.socket.bytesRead).toBeLessThan(1 << 20);
    client.destroy();
  });
});

describe("authenticateWithScram", () => {
  it("runs a SCRAM-SHA-256 exchange within PostgreSQL's caps on SASL messages", async () => {
    const { stream, client, received } = await connection();
    const scram = new ScramSha256Client("pencil");
    const done = authenticateWithScram(stream, "pencil", "alice");
    client.write(encodeSASLInitialResponse(SCRAM_SHA_256, scram.clientFirstMessage));
    // AuthenticationSASL, then AuthenticationSASLContinue with the server-first message.
    const serverFirst = await new Promise<string>((resolve) => {
      const look = () => {
        const bytes = Buffer.concat(received);
        const at = bytes.indexOf("r=");
        if (at >= 0) resolve(bytes.toString("utf8", at));
        else client.once("data", look);
      };
      look();
    });
    client.write(encodeSASLResponse(await scram.clientFinalMessage(serverFirst)));
    await done;
    client.destroy();
  });

  it(`refuses a SASL response over ${MAX_SASL_MESSAGE_LENGTH} bytes from its header`, async () => {
    const { stream, client } = await connection();
    client.write(header(FrontendCode.PasswordMessage, 60 * 1024 * 1024));
    const refused = await refusal(authenticateWithScram(stream, "pencil", "alice"));
    expect(refused).toMatchObject({
      sqlState: "08P01",
      message: "SASL response of 62914560 bytes exceeds the limit of 1024",
    });
    client.destroy();
  });
});
