import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import type { GatewayContext } from "../context.js";
import { Timestamp } from "../schemas.js";

const Probe = Type.Object({
  status: Type.Union([Type.Literal("alive"), Type.Literal("ready"), Type.Literal("draining")]),
  timestamp: Timestamp,
});

/**
 * Probes for load balancers and orchestrators. `GET /health` is liveness: 200 while the process serves HTTP at
 * all, whatever its databases do (restarting it would not mend them). `GET /ready` is readiness: 503 from
 * the moment the process starts to stop (SIGTERM), so that no new work is sent to it.
 */
export async function probeRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const schema = (summary: string) => ({
    summary,
    tags: ["health"],
    response: { 200: Probe, 503: Probe },
  });
  app.get("/health", { config: { rateLimit: false }, schema: schema("Liveness") }, async () => ({
    status: "alive" as const,
    timestamp: new Date().toISOString(),
  }));
  app.get(
    "/ready",
    { config: { rateLimit: false }, schema: schema("Readiness: 503 while the process drains") },
    async (_request, reply) => {
      const timestamp = new Date().toISOString();
      if (ctx.lifecycle?.draining) return reply.code(503).send({ status: "draining", timestamp });
      return { status: "ready" as const, timestamp };
    },
  );
}
