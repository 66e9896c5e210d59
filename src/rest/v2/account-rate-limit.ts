import type { FastifyReply, FastifyRequest } from "fastify";
import type { RateLimitStore } from "../plugins/rate-limit-store.js";
import { sendError } from "./errors.js";

/** The spec's limits: 700 requests a minute per account, and bursts of 40 a second per route per account. */
export const managementLimits = {
  sustained: { max: 700, windowMs: 60_000 },
  burst: { max: 40, windowMs: 1000 },
};

export interface AccountRateLimitOptions {
  store: RateLimitStore;
  limits?: typeof managementLimits;
  onStoreError?: (error: unknown) => void;
}

/**
 * Counts each authenticated request against its account (the user of a personal key, the organization of an
 * organization or project-scoped key): once per minute overall, once per second for its route. Past either
 * limit the answer is 429 with Retry-After. The counters live in the same store as the gateway's (memory, or
 * Redis shared by every pgtoll process); a failing store lets requests through.
 */
export function accountRateLimit(options: AccountRateLimitOptions) {
  const limits = options.limits ?? managementLimits;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const account = request.principal?.accountId;
    if (!account) return;
    const route = `${request.method} ${request.routeOptions.url ?? "unmatched"}`;
    let sustained: { count: number; resetAtMs: number };
    let burst: { count: number; resetAtMs: number };
    try {
      [sustained, burst] = await Promise.all([
        options.store.hit(`v2:account:${account}`, limits.sustained.windowMs),
        options.store.hit(`v2:route:${account}:${route}`, limits.burst.windowMs),
      ]);
    } catch (error) {
      options.onStoreError?.(error);
      return;
    }
    reply.header("X-RateLimit-Limit", limits.sustained.max);
    reply.header("X-RateLimit-Remaining", Math.max(0, limits.sustained.max - sustained.count));
    const exceeded =
      sustained.count > limits.sustained.max
        ? { hit: sustained, text: `${limits.sustained.max} requests per minute per account` }
        : burst.count > limits.burst.max
          ? { hit: burst, text: `${limits.burst.max} requests per second per route per account` }
          : null;
    if (!exceeded) return;
    const retryAfter = Math.max(1, Math.ceil((exceeded.hit.resetAtMs - Date.now()) / 1000));
    reply.header("Retry-After", retryAfter);
    return sendError(
      reply,
      request,
      429,
      "TOO_MANY_REQUESTS",
      `rate limit exceeded: at most ${exceeded.text}; retry in ${retryAfter} s`,
    );
  };
}
