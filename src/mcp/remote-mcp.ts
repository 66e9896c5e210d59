import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { getDailyLimit } from "../billing/daily-limits.js";
import { listLedgerEntries } from "../billing/ledger.js";
import { ProviderCache } from "../providers/provider-cache.js";
import type { ProxyAccess } from "../proxy/proxy-access.js";
import { isQuotaRefusal, SessionQuota } from "../proxy/session-quota.js";
import type { GatewayContext } from "../rest/context.js";
import { HttpError } from "../rest/plugins/errors.js";
import { presentDailyLimit, presentLedgerEntry } from "../rest/present.js";
import { catalogMcpHandler } from "./catalog-mcp.js";
import { registerPgtollTools } from "./pgtoll-tools.js";
import { ProxySession } from "./proxy-session.js";
import { fundingTierOf, remoteAccount } from "./remote-account.js";
import { remoteAuthentication, unauthorized } from "./remote-auth.js";
import { refuseSession } from "./session-refusal.js";

export interface RemoteMcpOptions {
  ctx: GatewayContext;
  proxy: ProxyAccess;
  /** Requests per minute per agent (not per IP: agents share hosts and egress addresses). */
  perAgentPerMinute: number;
  /** A session unused this long is closed, with its proxy session. Default 15 minutes. */
  idleMs?: number;
  /** Open sessions per agent at most; the least recently used is closed for a new one. Default 8. */
  maxSessionsPerAgent?: number;
  /** Open sessions per client address (`request.clientAddress`, after PGTOLL_TRUST_PROXY) at most; 0: no limit. Default 50. */
  sessionsPerAddress?: number;
  /** Open sessions at most. Default 2000. */
  maxSessions?: number;
  /** Of `maxSessions`, how many only funded agents may open (session-funding.ts). Default 0. */
  reservedForFunded?: number;
  /**
   * How long a session keeps its proxy session after its last call that needed the database. Default 10 s.
   * Warning: a transaction block left open by `query` calls is rolled back then.
   */
  proxyIdleMs?: number;
}

interface RemoteSession {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  proxySession: ProxySession;
  wallet: string;
  providerId: string;
  /** The newest valid token the agent sent: the proxy session reconnects with it. */
  token: string;
  lastUsedAt: number;
  /** Its place in the limits per address and in total. */
  place: { release(): void };
}

/**
 * `POST/GET/DELETE /mcp`: the pgtoll MCP tools over Streamable HTTP, sessions per the MCP specification
 * (`Mcp-Session-Id`). The agent is authenticated on every request by `Authorization: Bearer <agent token>`
 * for the provider named by `?provider=<id>` (or `X-Pgtoll-Provider`); each MCP session has one session on
 * this process's wire proxy, opened by the first tool call that needs the provider's database and given back
 * when idle, so tool calls are guarded and metered exactly like psql and the free tools hold no upstream
 * session. Sessions are limited per address and in total, with a share kept for funded agents. Without a
 * provider, `/mcp` serves the free catalog tools (catalog-mcp.ts).
 */
export async function remoteMcpRoutes(app: FastifyInstance, options: RemoteMcpOptions) {
  const { ctx, proxy } = options;
  const idleMs = options.idleMs ?? 15 * 60_000;
  const maxPerAgent = options.maxSessionsPerAgent ?? 8;
  const sessions = new Map<string, RemoteSession>();
  const providers = new ProviderCache(ctx.db);
  const quota = new SessionQuota({
    perAddress: options.sessionsPerAddress ?? 50,
    total: options.maxSessions ?? 2000,
    reservedForFunded: options.reservedForFunded ?? 0,
  });

  const closeSession = async (id: string) => {
    const session = sessions.get(id);
    if (!session) return;
    sessions.delete(id);
    session.place.release();
    await session.proxySession.close().catch(() => {});
    await session.server.close().catch(() => {});
  };
  const sweeper = setInterval(
    () => {
      const now = Date.now();
      for (const [id, session] of sessions) if (now - session.lastUsedAt > idleMs) void closeSession(id);
    },
    Math.min(60_000, idleMs),
  );
  sweeper.unref();
  app.addHook("onClose", async () => {
    clearInterval(sweeper);
    await Promise.all([...sessions.keys()].map(closeSession));
  });

  const authenticate = remoteAuthentication(ctx, options.perAgentPerMinute, sessionOf);

  function openSession(
    agent: { wallet: string; providerId: string; token: string },
    place: RemoteSession["place"],
  ): RemoteSession {
    const session = {
      ...agent,
      lastUsedAt: Date.now(),
      place,
    } as RemoteSession;
    session.proxySession = new ProxySession({
      // Our own proxy, in this process: no socket, no TLS.
      stream: () => {
        if (!proxy.connect) throw new Error("pgtoll's wire proxy is not listening yet");
        return proxy.connect();
      },
      wallet: agent.wallet,
      providerId: agent.providerId,
      token: async () => session.token,
      idleMs: options.proxyIdleMs ?? 10_000,
    });
    session.server = new McpServer({ name: "pgtoll", version: "1" });
    registerPgtollTools(session.server, {
      providerId: agent.providerId,
      wallet: agent.wallet,
      session: session.proxySession,
      account: remoteAccount(ctx.db, providers, agent.wallet, agent.providerId, session.proxySession),
      async transactions(limit) {
        const entries = await listLedgerEntries(ctx.db, agent.wallet, {
          providerId: agent.providerId,
          limit,
        });
        return entries.map(presentLedgerEntry);
      },
      dailyLimit: async () => presentDailyLimit(await getDailyLimit(ctx.db, agent.wallet, agent.providerId)),
    });
    session.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, session),
      onsessionclosed: (id) => void closeSession(id),
    });
    return session;
  }

  function sessionOf(request: FastifyRequest): RemoteSession | undefined {
    const id = request.headers["mcp-session-id"];
    return typeof id === "string" ? sessions.get(id) : undefined;
  }

  const catalog = catalogMcpHandler(ctx, options.perAgentPerMinute);

  async function handle(request: FastifyRequest, reply: FastifyReply) {
    // Without a provider, the free catalog tools: no token, no session.
    if (!(request.query as { provider?: string }).provider && !request.headers["x-pgtoll-provider"])
      return catalog(request, reply);
    const agent = await authenticate(request, reply);
    if (!agent) return reply;
    const id = request.headers["mcp-session-id"];
    let session: RemoteSession | undefined;
    if (typeof id === "string") {
      session = sessions.get(id);
      if (!session)
        return reply
          .code(404)
          .send({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      if (session.wallet !== agent.wallet || session.providerId !== agent.providerId)
        return unauthorized(reply, "this MCP session belongs to another agent or provider", true);
      session.token = agent.token;
      session.lastUsedAt = Date.now();
    } else if (request.method === "POST" && isInitializeRequest(request.body)) {
      const place = await admit(request, reply, agent);
      if (!place) return reply;
      session = openSession(agent, place);
      await session.server.connect(session.transport);
    } else {
      return reply.code(400).send({
        jsonrpc: "2.0",
        error: { code: -32000, message: "no Mcp-Session-Id: start a session with an initialize request" },
        id: null,
      });
    }
    reply.hijack();
    await session.transport.handleRequest(request.raw, reply.raw, request.body);
    // An initialize the transport refused opened no session: its place is given back.
    if (!session.transport.sessionId) {
      session.place.release();
      await session.server.close().catch(() => {});
    }
  }

  /**
   * A place for a new session of `agent`: its own least recently used session is closed first when it has
   * `maxSessionsPerAgent`; then the limits per address and in total, the funded share only for a funded agent.
   */
  async function admit(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: { wallet: string; providerId: string },
  ): Promise<RemoteSession["place"] | null> {
    const tier = await fundingTierOf(ctx.db, providers, agent.wallet, agent.providerId);
    if (tier === null)
      throw new HttpError(404, `provider ${agent.providerId} does not exist or has not set its pricing yet`);
    const mine = [...sessions.entries()].filter(([, s]) => s.wallet === agent.wallet);
    if (mine.length >= maxPerAgent) {
      const [oldest] = mine.sort(([, a], [, b]) => a.lastUsedAt - b.lastUsedAt)[0]!;
      void closeSession(oldest);
    }
    const place = quota.take(request.clientAddress, tier === "funded");
    if (!isQuotaRefusal(place)) return place;
    refuseSession(reply, place);
    return null;
  }

  const config = { rateLimit: false as const };
  app.post("/mcp", { config, schema: { hide: true } }, handle);
  app.get("/mcp", { config, schema: { hide: true } }, handle);
  app.delete("/mcp", { config, schema: { hide: true } }, handle);
}
