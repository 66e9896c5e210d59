import { TLSSocket } from "node:tls";
import { decodePasswordMessage, decodeSASLInitialResponse, decodeSASLResponse } from "./frontend-messages.js";
import { FrontendCode } from "./message-codes.js";
import { SqlState, StartupRefusal } from "./proxy-errors.js";
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
  const answer = await nextAuthFrame(stream);
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
    const initial = decodeSASLInitialResponse((await nextAuthFrame(stream)).payload);
    const serverFirst = await scram.serverFirstMessage(
      initial.mechanism,
      initial.data?.toString("utf8") ?? "",
    );
    stream.socket.write(encodeAuthenticationSASLContinue(serverFirst));
    const clientFinal = decodeSASLResponse((await nextAuthFrame(stream)).payload).toString("utf8");
    const serverFinal = scram.verifyClientFinal(clientFinal);
    if (serverFinal === null) throw passwordFailed(user);
    stream.socket.write(encodeAuthenticationSASLFinal(serverFinal));
  } catch (error) {
    if (error instanceof ScramProtocolError)
      throw new StartupRefusal(SqlState.protocolViolation, error.message, "protocol");
    throw error;
  }
}

/** The next password / SASL message; the socket is paused after it so nothing more is buffered meanwhile. */
async function nextAuthFrame(stream: StartupStream) {
  stream.socket.resume();
  const answer = await stream.nextFrame();
  // Nothing more is read until the relay starts: a client cannot make us buffer while it waits for a slot.
  stream.socket.pause();
  if (answer.code !== FrontendCode.PasswordMessage) {
    throw new StartupRefusal(SqlState.protocolViolation, "expected a password message", "protocol");
  }
  return answer;
}

/** The one answer to a wrong password or an unknown role, as PostgreSQL gives it. */
export function passwordFailed(user: string): StartupRefusal {
  return new StartupRefusal(
    SqlState.invalidPassword,
    `password authentication failed for user "${user}"`,
    "bad_password",
  );
}
