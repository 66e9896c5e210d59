import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { RateLimitStore } from "./rate-limit-store.js";

/** A named limit: `max` requests per `windowMs` per client IP. */
export interface RateLimitRule {
  name: string;
  max: number;
  windowMs: number;
}

const FIFTEEN_MINUTES = 15 * 60 * 1000;

/** The payment gateway's limits (spec "Limits"). */
export const gatewayLimits = {
  general: { name: "general", max: 100, windowMs: FIFTEEN_MINUTES },
  query: { name: "query", max: 20, windowMs: FIFTEEN_MINUTES },
  deposit: { name: "deposit", max: 10, windowMs: FIFTEEN_MINUTES },
  /**
   * The provider's reads (analytics, its pricing, the database check), an extension of the spec: a console
   * page load makes eight of them, so the general 100 would cut a provider off after a dozen views.
   */
  analytics: { name: "analytics", max: 600, windowMs: FIFTEEN_MINUTES },
} satisfies Record<string, RateLimitRule>;

declare module "fastify" {
  interface FastifyContextConfig {
    /** The limit this route counts against; `false` exempts it (health, metrics, docs). */
    rateLimit?: RateLimitRule | false;
  }
}

export interface RateLimitOptions {
  enabled: boolean;
  store: RateLimitStore;
  /** Used when a route names no rule. */
  defaultRule: RateLimitRule;
  onStoreError?: (error: unknown) => void;
}

/**
 * Per-client-IP fixed windows. Each request counts against exactly one rule: its route's, or the default.
 * Every counted response carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix time,
 * in seconds, at which the window ends); past the limit the answer is 429 `{error, retryAfter}` with a
 * Retry-After header. If the store fails (Redis down) the request is let through and the error reported:
 * a limiter outage must not become an API outage.
 */
export const rateLimitPlugin = fp(async (app: FastifyInstance, options: RateLimitOptions) => {
  if (!options.enabled) return;
  app.addHook("onRequest", async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method === "OPTIONS") return;
    const configured = request.routeOptions.config?.rateLimit;
    if (configured === false) return;
    const rule = configured ?? options.defaultRule;
    let hit: { count: number; resetAtMs: number };
    try {
      hit = await options.store.hit(`${rule.name}:${request.clientAddress}`, rule.windowMs);
    } catch (error) {
      options.onStoreError?.(error);
      return;
    }
    const resetSeconds = Math.ceil(hit.resetAtMs / 1000);
    reply.header("X-RateLimit-Limit", rule.max);
    reply.header("X-RateLimit-Remaining", Math.max(0, rule.max - hit.count));
    reply.header("X-RateLimit-Reset", resetSeconds);
    if (hit.count > rule.max) {
      const retryAfter = Math.max(1, Math.ceil((hit.resetAtMs - Date.now()) / 1000));
      reply.header("Retry-After", retryAfter);
      return reply.code(429).send({
        error: `too many requests: the ${rule.name} limit is ${rule.max} requests per ${rule.windowMs / 60_000} minutes per client IP; retry in ${retryAfter} s`,
        retryAfter,
      });
    }
  });
});
