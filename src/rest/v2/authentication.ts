import type { FastifyReply, FastifyRequest } from "fastify";
import { unauthorized } from "../../control/control-error.js";
import { authenticateApiKey } from "../../control/key-principals.js";
import type { Principal } from "../../control/principal.js";
import type { Queryable } from "../../control/sql.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The API key's principal; set on every v2 route before the handler runs. */
    principal: Principal | null;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The caller, or 401 when the request has no valid `Authorization: Bearer <API key>`. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw unauthorized("missing API key");
  return request.principal;
}

/** onRequest hook: every v2 request must carry a key that is known, not revoked and still valid. */
export function authenticate(db: Queryable) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    if (request.method === "OPTIONS") return;
    const header = request.headers.authorization;
    if (!header) throw unauthorized("missing Authorization header: send Authorization: Bearer <API key>");
    const match = BEARER.exec(header);
    if (!match?.[1]) throw unauthorized("malformed Authorization header: expected Bearer <API key>");
    request.principal = await authenticateApiKey(db, match[1], request.clientAddress);
  };
}
