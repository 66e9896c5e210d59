import { describe, expect, it } from "vitest";
import { AuthMessageReader, type ExpectedMessage } from "./auth-message-reader.js";
import { FrontendCode } from "./message-codes.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";
import { encodePasswordMessage, encodeQuery } from "./serializer.js";

const PASSWORD: ExpectedMessage = { code: FrontendCode.PasswordMessage, maxBodyLength: 20, name: "password" };

describe("AuthMessageReader", () => {
  it("takes a message fed byte by byte, and keeps what follows it", () => {
    const reader = new AuthMessageReader();
    const password = encodePasswordMessage("secret");
    for (const [i, byte] of [...password].entries()) {
      reader.feed(Buffer.from([byte]));
      const message = reader.take(PASSWORD);
      expect(message?.payload.toString()).toBe(i === password.length - 1 ? "secret\0" : undefined);
    }
    reader.feed(encodeQuery("SELECT 1"));
    expect(reader.rest()).toEqual(encodeQuery("SELECT 1"));
  });

  it.each([
    ["another type", Buffer.from([0x51, 0, 0, 0, 9]), 'expected password, got message type "Q"'],
    ["a length below 4", Buffer.from([0x70, 0, 0, 0, 3]), "invalid message length 3 for password"],
    ["a body over the cap", Buffer.from([0x70, 0, 0, 0, 25]), "password of 21 bytes exceeds the limit of 20"],
    [
      "a negative length",
      Buffer.from([0x70, 0x80, 0, 0, 0]),
      "invalid message length -2147483648 for password",
    ],
  ])("refuses %s from the header alone", (_name, header, message) => {
    const reader = new AuthMessageReader();
    reader.feed(header);
    expect(() => reader.take(PASSWORD)).toThrow(new ProtocolViolationError(message));
  });

  it("does not depend on the caller keeping its chunk intact", () => {
    const reader = new AuthMessageReader();
    const chunk = encodePasswordMessage("secret");
    reader.feed(chunk);
    chunk.fill(0);
    expect(reader.take(PASSWORD)?.payload.toString()).toBe("secret\0");
  });
});
