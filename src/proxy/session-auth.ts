import { TLSSocket } from "node:tls";
import { SqlState } from "../db/sql-state.js";
import type { ExpectedMessage } from "./auth-message-reader.js";
import { decodePasswordMessage, decodeSASLInitialResponse, decodeSASLResponse } from "./frontend-messages.js";
import { FrontendCode } from "./message-codes.js";
import { StartupRefusal } from "./proxy-errors.js";
import { ScramProtocolError, ScramServer } from "./scram-server.js";
import {
  encodeAuthenticationCleartextPassword,
  encodeAuthenticationSASL,
  encodeAuthenticationSASLContinue,
  encodeAuthenticationSASLFinal,
} from "./serializer.js";
import type { StartupStream } from "./startup-stream.js";
import { serverEndPointBinding } from "./tls-server-end-point.js";

/** Asks for the password in clear text (the channel is TLS or loopback) and reads it. */
export async function readCleartextPassword(stream: StartupStream): Promise<string> {
  stream.socket.write(encodeAuthenticationCleartextPassword());
  const answer = await stream.nextMessage(PASSWORD_MESSAGE);
  return decodePasswordMessage(answer.payload);
}

/**
 * Authenticates the client with SCRAM-SHA-256 against `password` (null: a role that cannot log in, which
 * fails like a wrong password), with channel binding (SCRAM-SHA-256-PLUS) offered on TLS, as PostgreSQL
 * does. Throws a 28P01 refusal for `user` when the proof is wrong.
 */
export async function authenticateWithScram(
  stream: StartupStream,
  password: string | null,
  user: string,
): Promise<void> {
  const binding = stream.socket instanceof TLSSocket ? serverEndPointBinding(stream.socket) : null;
  const scram = new ScramServer({ password, channelBinding: binding });
  try {
    stream.socket.write(encodeAuthenticationSASL(scram.mechanisms));
    const initial = decodeSASLInitialResponse((await stream.nextMessage(SASL_RESPONSE)).payload);
    const serverFirst = await scram.serverFirstMessage(
      initial.mechanism,
      initial.data?.toString("utf8") ?? "",
    );
    stream.socket.write(encodeAuthenticationSASLContinue(serverFirst));
    const clientFinal = decodeSASLResponse((await stream.nextMessage(SASL_RESPONSE)).payload).toString(
      "utf8",
    );
    const serverFinal = scram.verifyClientFinal(clientFinal);
    if (serverFinal === null) throw passwordFailed(user);
    stream.socket.write(encodeAuthenticationSASLFinal(serverFinal));
  } catch (error) {
    if (error instanceof ScramProtocolError)
      throw new StartupRefusal(SqlState.protocolViolation, error.message, "protocol");
    throw error;
  }
}

/**
 * Longest password accepted, in bytes: what clients send here is an agent token (`pgtoll1.<issued>.<signature>`,
 * at most 153 bytes) or a branch role's password, 24 characters, possibly as `endpoint=<id>;<password>` (under
 * 100 bytes). PostgreSQL takes up to 65 535; nothing longer than this can be right here.
 */
export const MAX_PASSWORD_LENGTH = 1000;

/** PostgreSQL's cap on a SCRAM message (PG_MAX_SASL_MESSAGE_LENGTH); SCRAM's own are a few hundred bytes. */
export const MAX_SASL_MESSAGE_LENGTH = 1024;

const PASSWORD_MESSAGE: ExpectedMessage = {
  code: FrontendCode.PasswordMessage,
  // The password and its NUL terminator.
  maxBodyLength: MAX_PASSWORD_LENGTH + 1,
  name: "password message",
};

const SASL_RESPONSE: ExpectedMessage = {
  code: FrontendCode.PasswordMessage,
  maxBodyLength: MAX_SASL_MESSAGE_LENGTH,
  name: "SASL response",
};

/** The one answer to a wrong password or an unknown role, as PostgreSQL gives it. */
export function passwordFailed(user: string): StartupRefusal {
  return new StartupRefusal(
    SqlState.invalidPassword,
    `password authentication failed for user "${user}"`,
    "bad_password",
  );
}
