import { connect, type LookupFunction, type Socket } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { SqlState } from "../db/sql-state.js";
import { parseProviderConnection } from "../providers/connection-string.js";
import {
  decodeAuthentication,
  decodeBackendKeyData,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  type TransactionStatus,
} from "./backend-messages.js";
import { type Frame, FrameReader } from "./frame-reader.js";
import { BackendCode } from "./message-codes.js";
import { md5Password, SCRAM_SHA_256, ScramSha256Client } from "./scram-client.js";
import {
  encodePasswordMessage,
  encodeSASLInitialResponse,
  encodeSASLResponse,
  encodeStartupMessage,
} from "./serializer.js";

/** Where and as whom the proxy connects for a provider, from its stored connection string. */
export interface UpstreamTarget {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  /** sslmode require/verify-*: TLS is mandatory; prefer: tried, plain if refused; disable: never. */
  ssl: "disable" | "prefer" | "require" | "verify";
  /** How the host name is resolved (a provider's: checked against PGTOLL_PROVIDER_HOSTS); unset: the system's. */
  lookup?: LookupFunction;
  /** The `options` startup parameter, from the connection string only (never a client's). */
  options?: string;
}

/** The target of a connection string, read as REST reads it (parseProviderConnection), `options` included. */
export function parseUpstreamTarget(connectionString: string): UpstreamTarget {
  const { sslmode, host, port, user, password, database, options } =
    parseProviderConnection(connectionString);
  const ssl =
    sslmode === "disable" || sslmode === "allow"
      ? "disable"
      : sslmode === "prefer"
        ? "prefer"
        : sslmode === "require"
          ? "require"
          : "verify";
  return { host, port, user, password, database, ssl, ...(options ? { options } : {}) };
}

/**
 * The startup message's parameters: the session's settings, then the connection fields, which are the target's
 * alone: a setting named `user`, `database`, `options` or `replication` (a client's `-c database=...`) is dropped.
 */
export function startupParameters(
  target: UpstreamTarget,
  parameters: Record<string, string>,
): Record<string, string> {
  const settings = Object.entries(parameters).filter(([name]) => !CONNECTION_FIELDS.has(name.toLowerCase()));
  return {
    ...Object.fromEntries(settings),
    user: target.user,
    database: target.database,
    ...(target.options ? { options: target.options } : {}),
  };
}

const CONNECTION_FIELDS = new Set(["user", "database", "options", "replication"]);

/** A ready upstream session: authenticated, its startup parameters collected, waiting for a query. */
export interface UpstreamSession {
  socket: Socket | TLSSocket;
  target: UpstreamTarget;
  processId: number;
  secretKey: Buffer;
  /** ParameterStatus values the server sent during startup, to pass on to the client. */
  parameters: Map<string, string>;
  status: TransactionStatus;
}

/** The upstream refused the connection or failed during startup; `fields` holds its ErrorResponse, if any. */
export class UpstreamStartupError extends Error {
  constructor(
    message: string,
    readonly sqlState: string = SqlState.connectionFailure,
  ) {
    super(message);
    this.name = "UpstreamStartupError";
  }
}

function openSocket(target: UpstreamTarget, timeoutMs: number): Promise<Socket | TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: target.host,
      port: target.port,
      ...(target.lookup ? { lookup: target.lookup } : {}),
    });
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new UpstreamStartupError(`connecting to the provider's database timed out after ${timeoutMs} ms`),
      );
    }, timeoutMs);
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(new UpstreamStartupError(`cannot reach the provider's database: ${error.message}`));
    });
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      if (target.ssl === "disable") return resolve(socket);
      const request = Buffer.alloc(8);
      request.writeInt32BE(8, 0);
      request.writeInt32BE(80877103, 4);
      socket.write(request);
      socket.once("data", (answer) => {
        if (answer[0] === 0x53 /* S */) {
          const secure = tlsConnect({
            socket,
            servername: target.host,
            rejectUnauthorized: target.ssl === "verify",
          });
          secure.once("secureConnect", () => resolve(secure));
          secure.once("error", (error) =>
            reject(new UpstreamStartupError(`TLS to the provider's database failed: ${error.message}`)),
          );
        } else if (target.ssl === "prefer") {
          resolve(socket);
        } else {
          socket.destroy();
          reject(
            new UpstreamStartupError(
              "the provider's database refused TLS, which its connection string requires",
            ),
          );
        }
      });
    });
  });
}

/**
 * Opens and authenticates one upstream session (cleartext, md5 or SCRAM-SHA-256), sending `parameters` in the
 * startup message after the target's own `options`, so that PostgreSQL applies them last and they win. Resolves at the first ReadyForQuery; the socket then has no listeners and is paused.
 */
export async function connectUpstream(
  target: UpstreamTarget,
  parameters: Record<string, string>,
  timeoutMs = 10_000,
): Promise<UpstreamSession> {
  const socket = await openSocket(target, timeoutMs);
  const reader = new FrameReader();
  const session: UpstreamSession = {
    socket,
    target,
    processId: 0,
    secretKey: Buffer.alloc(0),
    parameters: new Map(),
    status: "I",
  };
  let scram: ScramSha256Client | undefined;

  return await new Promise<UpstreamSession>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        fail(
          new UpstreamStartupError(`the provider's database did not finish startup within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    const fail = (error: Error) => {
      clearTimeout(timer);
      socket.removeAllListeners("data");
      socket.destroy();
      reject(error);
    };
    const onFrame = async (frame: Frame) => {
      switch (frame.code) {
        case BackendCode.Authentication: {
          const auth = decodeAuthentication(frame.payload);
          if (auth.type === "ok") return;
          if (auth.type === "cleartextPassword")
            return void socket.write(encodePasswordMessage(target.password));
          if (auth.type === "md5Password")
            return void socket.write(
              encodePasswordMessage(md5Password(target.user, target.password, auth.salt)),
            );
          if (auth.type === "sasl") {
            if (!auth.mechanisms.includes(SCRAM_SHA_256))
              throw new UpstreamStartupError(`unsupported SASL mechanisms: ${auth.mechanisms.join(", ")}`);
            scram = new ScramSha256Client(target.password);
            return void socket.write(encodeSASLInitialResponse(SCRAM_SHA_256, scram.clientFirstMessage));
          }
          if (auth.type === "saslContinue" && scram) {
            return void socket.write(
              encodeSASLResponse(await scram.clientFinalMessage(auth.data.toString("utf8"))),
            );
          }
          if (auth.type === "saslFinal" && scram) return scram.verifyServerFinal(auth.data.toString("utf8"));
          throw new UpstreamStartupError(
            "the provider's database asked for an authentication method pgtoll does not support",
          );
        }
        case BackendCode.ParameterStatus: {
          const { name, value } = decodeParameterStatus(frame.payload);
          session.parameters.set(name, value);
          return;
        }
        case BackendCode.BackendKeyData: {
          const key = decodeBackendKeyData(frame.payload);
          session.processId = key.processId;
          session.secretKey = key.secretKey;
          return;
        }
        case BackendCode.ErrorResponse: {
          const fields = decodeNoticeFields(frame.payload);
          throw new UpstreamStartupError(
            `the provider's database refused the session: ${fields.message}`,
            fields.code ?? SqlState.connectionFailure,
          );
        }
        case BackendCode.ReadyForQuery:
          session.status = decodeReadyForQuery(frame.payload);
          clearTimeout(timer);
          socket.removeAllListeners("data");
          socket.removeAllListeners("error");
          socket.removeAllListeners("close");
          socket.pause();
          resolve(session);
          return;
        default:
          return; // NoticeResponse and NegotiateProtocolVersion during startup carry nothing the proxy needs
      }
    };
    // Startup frames are handled strictly in order, including the async SCRAM step.
    let chain = Promise.resolve();
    socket.on("data", (chunk: Buffer) => {
      try {
        reader.feed(chunk, (frame) => {
          const copy = { code: frame.code, payload: Buffer.from(frame.payload), frame: frame.frame };
          chain = chain.then(() => onFrame(copy)).catch(fail);
        });
      } catch (error) {
        fail(error as Error);
      }
    });
    socket.once("error", (error) =>
      fail(new UpstreamStartupError(`the provider's database connection failed: ${error.message}`)),
    );
    socket.once("close", () =>
      fail(new UpstreamStartupError("the provider's database closed the connection during startup")),
    );
    socket.write(encodeStartupMessage(startupParameters(target, parameters)));
  });
}
