import type { FastifyInstance } from "fastify";
import type { GatewayContext } from "../context.js";
import { Health } from "../schemas.js";

const HEALTH_TIMEOUT_MS = 2000;

/** GET /api/health: healthy when the metadata database answers within 2 s, 503 otherwise. */
export async function healthRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  app.get(
    "/api/health",
    {
      config: { rateLimit: false },
      schema: {
        summary: "Liveness and database health",
        tags: ["health"],
        response: { 200: Health, 503: Health },
      },
    },
    async (_request, reply) => {
      const timestamp = new Date().toISOString();
      try {
        await Promise.race([
          ctx.db.query("SELECT 1"),
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error("timed out")), HEALTH_TIMEOUT_MS).unref(),
          ),
        ]);
        return { status: "healthy", timestamp };
      } catch (error) {
        return reply.code(503).send({
          status: "unhealthy",
          timestamp,
          error: `database unreachable: ${(error as Error).message}`,
        });
      }
    },
  );
}
