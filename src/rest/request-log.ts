import { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import type { Logger } from "pino";

/**
 * Fastify's per-request logging, as one line per request written once its response is sent:
 * `{reqId, method, url, statusCode, responseTime, remoteAddress, msg: "request completed"}`, `responseTime` in
 * milliseconds. A response that failed to be sent is logged at error level with its error ("request errored");
 * a 5xx is also logged, with its error, by the error handler. Fastify's "incoming request" line is not written:
 * the completed line carries its method, URL and client address.
 *
 * The line goes through a child of `logger` without redaction: its fields are fixed and none of them is a redacted
 * path, and pino's wildcard redaction otherwise runs on every field of every line, which costs more than the
 * rest of the line.
 */
export class RequestLog extends LogController {
  readonly #lines: Logger;

  constructor(logger: Logger) {
    super();
    this.#lines = logger.child({}, { redact: [] });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (error) {
      reply.log.error({ res: reply, err: error, responseTime: reply.elapsedTime }, "request errored");
      return;
    }
    this.#lines.info(
      {
        reqId: request.id,
        method: request.method,
        url: request.url,
        statusCode: reply.statusCode,
        responseTime: Math.round(reply.elapsedTime * 1000) / 1000,
        remoteAddress: request.clientAddress,
      },
      "request completed",
    );
  }
}
