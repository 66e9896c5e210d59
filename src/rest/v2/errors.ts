import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { ControlError } from "../../control/control-error.js";

/** Neon's error body: `{code, message}`, plus the request id to quote when reporting a problem. */
export function sendError(
  reply: FastifyReply,
  request: FastifyRequest,
  status: number,
  code: string,
  message: string,
) {
  return reply.code(status).send({ request_id: request.id, code, message });
}

/** Every error of the v2 API leaves as `{request_id, code, message}`; 5xx details stay in the log. */
export function managementErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof ControlError)
    return sendError(reply, request, error.statusCode, error.code, error.message);
  if (error.validation)
    return sendError(reply, request, 400, "BAD_REQUEST", `invalid request: ${error.message}`);
  const status =
    error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  if (status < 500) {
    const message =
      error.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE"
        ? "send request bodies as JSON with Content-Type: application/json"
        : error.message;
    return sendError(
      reply,
      request,
      status,
      status === 415 ? "UNSUPPORTED_MEDIA_TYPE" : "BAD_REQUEST",
      message,
    );
  }
  request.log.error({ err: error }, "management API request failed");
  return sendError(reply, request, 500, "INTERNAL_ERROR", "internal server error");
}
