import type { FastifyError, FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { isLedgerUnavailable } from "../../billing/ledger-availability.js";

/** What an error answer carries besides `{error}`: headers, and fields added to the body. */
export interface HttpErrorExtras {
  headers?: Record<string, string>;
  body?: Record<string, unknown>;
}

/** An error whose message is meant for the client, with its HTTP status (and a SQLSTATE, sent as `code`). */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly sqlState?: string,
    readonly extras?: HttpErrorExtras,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** Fastify's own client-side errors, reworded so that the message says what was wrong. */
function clientMessage(error: FastifyError): string {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return "unsupported content type: send the body as JSON with Content-Type: application/json";
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return "request body too large";
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return "the request body is empty but Content-Type is application/json";
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return `malformed JSON body: ${error.message}`;
    default:
      if (error.validation) return `invalid input: ${error.message}`;
      if (error instanceof SyntaxError) return `malformed JSON body: ${error.message}`;
      return error.message;
  }
}

/**
 * Every error leaves the server as `{error: string}` with the right status. 5xx answers carry a message meant
 * for the client when one was given (HttpError and friends), otherwise a generic one; a stack trace never
 * leaves the server, and every 5xx is logged with its request id.
 */
export const errorsPlugin = fp(async (app: FastifyInstance) => {
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: `route not found: ${request.method} ${request.url.split("?")[0]}` });
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status =
      error.statusCode && error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
    const sqlState = error instanceof HttpError ? error.sqlState : undefined;
    const extras = error instanceof HttpError ? error.extras : undefined;
    if (extras?.headers) reply.headers(extras.headers);
    const withCode = (body: { error: string }) => ({
      ...body,
      ...(sqlState ? { code: sqlState } : {}),
      ...extras?.body,
    });
    if (status === 500 && isLedgerUnavailable(error)) {
      request.log.warn({ err: error }, "a database pgtoll needs is unavailable");
      return reply
        .code(503)
        .header("retry-after", "5")
        .send({ error: "the pgtoll ledger is unavailable; try again shortly" });
    }
    if (status >= 500) {
      request.log.error({ err: error }, "request failed");
      const exposed = error instanceof HttpError || (error as { expose?: boolean }).expose === true;
      return reply.code(status).send(withCode({ error: exposed ? error.message : "internal server error" }));
    }
    return reply.code(status).send(withCode({ error: clientMessage(error) }));
  });
});
