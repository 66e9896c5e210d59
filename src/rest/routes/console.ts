import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";

/**
 * Where `npm run build` writes the console bundle (scripts/build-console.mjs): dist/console at the package
 * root, reached the same from src/rest/routes (tsx) and dist/rest/routes (the build).
 */
export const CONSOLE_DIR = fileURLToPath(new URL("../../../dist/console/", import.meta.url));

const FILES = {
  "index.html": "text/html; charset=utf-8",
  "console.js": "text/javascript; charset=utf-8",
  "console.css": "text/css; charset=utf-8",
} as const;

type ConsoleFile = keyof typeof FILES;

/** The page talks to this server only: no other origin may be reached, framed into, or posted to. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * GET /console: the provider console, a page bundled at build time, served from memory (read once). Without a
 * build the routes answer 503 saying how to make one.
 */
export async function consoleRoutes(app: FastifyInstance) {
  const files = new Map<ConsoleFile, Buffer>();
  for (const name of Object.keys(FILES) as ConsoleFile[]) {
    const content = await readFile(`${CONSOLE_DIR}${name}`).catch(() => undefined);
    if (content) files.set(name, content);
  }
  const send = (reply: FastifyReply, name: ConsoleFile) => {
    const content = files.get(name);
    if (!content)
      return reply.code(503).send({ error: "the console is not built: run npm run build (npm ci runs it)" });
    return reply
      .header("Content-Type", FILES[name])
      .header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
      .header("X-Content-Type-Options", "nosniff")
      .header("Referrer-Policy", "no-referrer")
      .header("Cache-Control", "no-cache")
      .send(content);
  };
  const page = { config: { rateLimit: false as const }, schema: { hide: true } };
  app.get("/console", page, (_request, reply) => send(reply, "index.html"));
  app.get("/console/", page, (_request, reply) => send(reply, "index.html"));
  app.get("/console/console.js", page, (_request, reply) => send(reply, "console.js"));
  app.get("/console/console.css", page, (_request, reply) => send(reply, "console.css"));
}
