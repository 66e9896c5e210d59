import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";

/** What browsers may send cross-origin to a group of routes. */
export interface CorsPolicy {
  methods: readonly string[];
  allowedHeaders: readonly string[];
}

export interface CorsOptions {
  /** Response headers a page may read. */
  exposedHeaders: readonly string[];
  /** The policy of every route outside the prefixes of `byPrefix`. */
  policy: CorsPolicy;
  /** Policies of the routes whose URL starts with the key. */
  byPrefix?: Record<string, CorsPolicy>;
}

/**
 * CORS for any origin, without credentials. The response to a request with an `Origin` header (every request a
 * browser makes cross-origin) carries `Access-Control-Allow-Origin: *` and `Access-Control-Expose-Headers`;
 * other clients do not read them and do not get them, and every response says `Vary: Origin` so that no cache
 * hands one kind of answer to the other. An OPTIONS request is a preflight and is answered here, before any
 * other hook (authentication, rate limits): 204 with the allowed methods and headers of its URL's policy, or 400
 * when it lacks `Origin` or `Access-Control-Request-Method`.
 *
 * The header values are joined once, at registration: the hook runs on every request, and @fastify/cors's
 * per-request options (needed for a policy per URL) cost more than the rest of it.
 */
export const corsPlugin = fp(async (app: FastifyInstance, options: CorsOptions) => {
  const exposed = options.exposedHeaders.join(", ");
  const compile = (policy: CorsPolicy) => ({
    methods: policy.methods.join(", "),
    allowedHeaders: policy.allowedHeaders.join(", "),
  });
  const fallback = compile(options.policy);
  const prefixed = Object.entries(options.byPrefix ?? {}).map(
    ([prefix, policy]) => [prefix, compile(policy)] as const,
  );
  const policyFor = (url: string) => prefixed.find(([prefix]) => url.startsWith(prefix))?.[1] ?? fallback;

  app.addHook("onRequest", (request, reply, done) => {
    reply.header("Vary", "Origin");
    const { headers } = request;
    if (headers.origin !== undefined) {
      reply.header("Access-Control-Allow-Origin", "*");
      reply.header("Access-Control-Expose-Headers", exposed);
    }
    if (request.method !== "OPTIONS") return done();
    if (!headers.origin || !headers["access-control-request-method"]) {
      reply.code(400).type("text/plain").send("Invalid Preflight Request");
      return;
    }
    const policy = policyFor(request.url);
    reply
      .header("Access-Control-Allow-Methods", policy.methods)
      .header("Access-Control-Allow-Headers", policy.allowedHeaders)
      .header("Content-Length", "0")
      .code(204)
      .send();
  });
  // Lets the router accept a preflight for any URL; the hook above has already answered it.
  app.options("*", { schema: { hide: true } }, (_request, reply) => {
    reply.callNotFound();
  });
});
