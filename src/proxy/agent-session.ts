import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import type { RefusalKind } from "../analytics/refusal-tally.js";
import { normalizeAddress } from "../billing/address.js";
import type { Price } from "../billing/cost.js";
import { SqlState } from "../db/sql-state.js";
import { findReadOnlySettingViolation } from "../guard/index.js";
import { ProviderGuards } from "../guard/provider-guards.js";
import { standardPolicy } from "../guard/standard-policy.js";
import { StatementShapes } from "../guard/statement-shape.js";
import { findProviderForQuery, type PricingRecord } from "../providers/registry.js";
import { verifyAgentToken } from "./agent-token.js";
import type { Frame } from "./frame-reader.js";
import { fundsRefusal } from "./funds-refusal.js";
import { idleHoldsOf } from "./idle-holds.js";
import { sessionSettings } from "./in-band-settings.js";
import type { ProxyContext } from "./proxy-context.js";
import { errorFrame, StartupRefusal } from "./proxy-errors.js";
import { Relay } from "./relay.js";
import { encodeTerminate } from "./serializer.js";
import { restartFarewell } from "./session-drain.js";
import { type AgentFunding, agentFunding } from "./session-funding.js";
import { SessionMeter } from "./session-meter.js";
import { cancelUpstreamQuery, registerCancelKey, type SessionPlan, welcomeMessage } from "./session-plan.js";
import type { SessionRequest } from "./startup-options.js";
import { statementMetering } from "./statement-metering.js";
import { statementPolicy } from "./statement-policy.js";
import { parseUpstreamTarget, type UpstreamSession } from "./upstream-connection.js";
import { limitedSlotKey } from "./upstream-slots.js";

/** An agent that pgtoll's caller has already authenticated, for the one provider it may reach. */
export interface AuthenticatedAgent {
  /** The agent's wallet address. */
  wallet: string;
  providerId: string;
  /**
   * The surface whose requests the session runs, when not the wire's: `rest` writes each query as REST does (one
   * ledger entry with its SQL, see `MeterOptions.entries`) and counts its earnings as REST's.
   */
  surface?: "rest";
}

/**
 * How an agent proves its wallet: an agent token sent as its password, or, on a connection pgtoll made within its
 * own process (`connectInProcess`), the agent that pgtoll's own surface already authenticated (a REST request's
 * signature or x402 payment). Only an in-process connection can carry the second: no byte a client sends does.
 */
export type AgentCredential = { token: string } | { authenticated: AuthenticatedAgent };

/**
 * An agent's session: `user` is its wallet, `database` the provider id, the password an agent token
 * (`pgtoll agent-token`). The provider must exist and have set its pricing; the session is then the metered,
 * guarded relay to the provider's database.
 */
export async function planAgentSession(
  request: SessionRequest,
  credential: AgentCredential,
  ctx: ProxyContext,
  /** The client's address (the peer's, or a trusted balancer's PROXY header's), for the session's log lines. */
  clientAddress?: string,
): Promise<SessionPlan> {
  await checkAgentCredential(request, credential);
  const found = await findProviderForQuery(ctx.db, request.providerId);
  if (!found)
    throw new StartupRefusal(
      SqlState.invalidCatalogName,
      `provider ${request.providerId} does not exist`,
      "unknown_provider",
    );
  const price = found.pricing;
  if (!price)
    throw new StartupRefusal(
      SqlState.connectionRejected,
      `provider ${request.providerId} has not set its pricing yet`,
      "no_pricing",
    );
  if (price.readOnly) {
    for (const [name, value] of Object.entries(request.settings)) {
      const denial = findReadOnlySettingViolation(name, value);
      if (denial) throw new StartupRefusal(SqlState.readOnlyTransaction, denial.message, "read_only_setting");
    }
  }
  // No upstream session for an agent that cannot pay a row; one that pays nothing stays out of the funded share.
  const funding = await fundingForSession(ctx, request.agentWallet, request.providerId, price.price);
  if (funding.tier === "unfunded")
    throw fundsRefusal(request.providerId, funding, price.price, found.provider.walletAddress);
  const guard = guardsOf(ctx).checkFor(price);
  return {
    slotKey: funding.tier === "funded" ? request.providerId : limitedSlotKey(request.providerId),
    target: {
      ...parseUpstreamTarget(ctx.box.open(found.provider.connectionSecret)),
      ...(ctx.providerLookup ? { lookup: ctx.providerLookup } : {}),
    },
    parameters: {
      application_name: request.applicationName || "pgtoll",
      client_encoding: "UTF8",
      statement_timeout: String(ctx.statementTimeoutMs),
      ...request.settings,
      // After the client's settings, so that none can replace them (the guard refuses them at connect and in SET).
      // No agent holds locks the provider's application waits for: not while idle in a transaction, nor for long.
      lock_timeout: String(price.lockTimeoutMs),
      idle_in_transaction_session_timeout: String(price.idleInTransactionTimeoutMs),
      ...(price.readOnly ? { default_transaction_read_only: "on" } : {}),
    },
    refuseSuperuser: !ctx.allowPrivilegedProviderRoles,
    start: (client, upstream, early, releaseSlot) =>
      startMeteredRelay(
        client,
        upstream,
        request.agentWallet,
        request.providerId,
        found.provider.walletAddress,
        price,
        guard,
        ctx,
        early,
        releaseSlot,
        clientAddress,
        request.pgtollSettings,
        "authenticated" in credential ? (credential.authenticated.surface ?? "proxy") : "proxy",
      ),
  };
}

/** The refusal of a startup on a connection opened for `agent` that names something else (`named`). */
export function notThisAgent(agent: AuthenticatedAgent, named: string): StartupRefusal {
  return new StartupRefusal(
    SqlState.invalidAuthorization,
    `this connection is for wallet ${agent.wallet} on provider ${agent.providerId}, not ${named}`,
    "bad_user",
  );
}

/** Refuses a startup whose wallet the credential does not prove, for the provider it names. */
async function checkAgentCredential(request: SessionRequest, credential: AgentCredential): Promise<void> {
  if ("authenticated" in credential) {
    const agent = credential.authenticated;
    if (normalizeAddress(agent.wallet) === request.agentWallet && agent.providerId === request.providerId)
      return;
    throw notThisAgent(agent, `wallet ${request.agentWallet} on provider ${request.providerId}`);
  }
  const check = await verifyAgentToken(credential.token, request.agentWallet, request.providerId);
  if (!check.ok) {
    throw new StartupRefusal(
      SqlState.invalidPassword,
      `password authentication failed for wallet ${request.agentWallet}: ${check.reason}`,
      "bad_token",
    );
  }
}

/**
 * How long a session serving REST keeps its hold once idle. An agent's requests that follow each other closer
 * than this run on the hold they left; one alone reserves before it runs and releases this long after its answer.
 */
export const REST_IDLE_RELEASE_MS = 100;

/** One memo of statement fingerprints per proxy, for the breakdown of its sessions' ledger entries. */
const statementShapes = new WeakMap<ProxyContext, StatementShapes>();

function statementShapesOf(ctx: ProxyContext): StatementShapes {
  let shapes = statementShapes.get(ctx);
  if (!shapes) {
    shapes = new StatementShapes();
    statementShapes.set(ctx, shapes);
  }
  return shapes;
}

/**
 * Waits before a refusal stands when only the agent's holds keep it from paying a row, in milliseconds: a hold
 * idle in another pgtoll process comes back after its idle spell (a REST session's: `REST_IDLE_RELEASE_MS`).
 */
const HELD_FUNDS_WAITS_MS = [50, 100, 100];

/**
 * The agent's funding for a new session. When what it has is held by its other sessions, those idle in this
 * process give it back at once (`IdleHolds`), and a refusal waits a moment for those of other processes.
 */
async function fundingForSession(
  ctx: ProxyContext,
  agentWallet: string,
  providerId: string,
  price: Price,
): Promise<AgentFunding> {
  let funding = await agentFunding(ctx.db, agentWallet, providerId, price);
  for (const waitMs of [0, ...HELD_FUNDS_WAITS_MS]) {
    const heldBack =
      funding.tier === "unfunded" && funding.availableMicro + funding.heldMicro >= funding.neededMicro;
    if (!heldBack) return funding;
    if (waitMs === 0) {
      // First what this process's idle sessions hold; with none idle, nothing changed to read again.
      const reclaimed = idleHoldsOf(ctx).reclaim(agentWallet, providerId);
      if (!reclaimed) continue;
      await reclaimed;
    } else await new Promise((resolve) => setTimeout(resolve, waitMs));
    funding = await agentFunding(ctx.db, agentWallet, providerId, price);
  }
  return funding;
}

/** One set of providers' guards per proxy, over its verdict cache. */
const providerGuards = new WeakMap<ProxyContext, ProviderGuards>();

function guardsOf(ctx: ProxyContext): ProviderGuards {
  let guards = providerGuards.get(ctx);
  if (!guards) {
    guards = new ProviderGuards(ctx.policy ?? standardPolicy, ctx.check);
    providerGuards.set(ctx, guards);
  }
  return guards;
}

function startMeteredRelay(
  client: Socket,
  upstream: UpstreamSession,
  agentWallet: string,
  providerId: string,
  depositAddress: string,
  price: PricingRecord,
  check: ProxyContext["check"],
  ctx: ProxyContext,
  early: Frame[],
  releaseSlot: () => void,
  clientAddress: string | undefined,
  pgtollSettings: Record<string, string>,
  surface: "proxy" | "rest",
): void {
  const sessionId = randomUUID();
  const meter = new SessionMeter(ctx.db, ctx.chargeWriter, agentWallet, providerId, price.price, {
    reserveRows: ctx.reserveRows,
    maxReserveRows: ctx.reserveMaxRows,
    reservationTtlSeconds: ctx.reservationTtlSeconds,
    clock: ctx.windowClock,
    windowMaxCostMicro: ctx.windowMaxCostMicro,
    sessionId,
    shapes: statementShapesOf(ctx),
    ...(ctx.limits ? { limits: ctx.limits } : {}),
    onCharge: (cost) => ctx.metrics.chargedMicro.inc(Number(cost)),
    onWindowClosed: (statements, rows, cost) => ctx.earnings.add(providerId, surface, statements, rows, cost),
    reclaimIdleHolds: () => idleHoldsOf(ctx).reclaim(agentWallet, providerId),
    ...(surface === "rest" ? { entries: "query" as const } : {}),
  });
  const key = registerCancelKey(ctx.registry, upstream);
  upstream.socket.on("error", () => {});
  const log = ctx.logger.child({ session: sessionId, pid: key.processId, providerId, client: clientAddress });
  let ended = false;
  let drained: () => void = () => {};
  let leaveDrain = () => {};
  const countRefusal = (kind: RefusalKind, rule: string) => ctx.refusals.count(providerId, kind, rule);
  const settings = sessionSettings({ meter, depositAddress });
  // Checked at startup (startup-options.ts): applying them cannot fail.
  for (const [name, value] of Object.entries(pgtollSettings)) settings.change(name, value, 1);
  let forgetIdleHold = () => {};
  const relay: Relay = new Relay({
    client,
    upstream: upstream.socket,
    policy: statementPolicy({ check, settings, tally: ctx.metrics.tally, countRefusal }),
    metering: statementMetering({
      meter,
      maxRowsWritten: price.maxRowsWrittenPerStatement,
      logger: log,
      countRefusal,
      ...(ctx.maxRowBytes === undefined ? {} : { maxRowBytes: ctx.maxRowBytes }),
    }),
    settings,
    metrics: ctx.metrics,
    logger: log,
    status: upstream.status,
    idleReleaseMs: surface === "rest" ? (ctx.restIdleReleaseMs ?? REST_IDLE_RELEASE_MS) : ctx.idleReleaseMs,
    drainTimeoutMs: ctx.statementTimeoutMs + 5000,
    cancelUpstream: () => cancelUpstreamQuery(upstream),
    onEnd: (reason) => {
      if (ended) return;
      ended = true;
      log.debug({ reason }, "session ended");
      key.unregister();
      leaveDrain();
      ctx.metrics.sessionsActive.dec();
      if (!upstream.socket.destroyed) upstream.socket.end(encodeTerminate());
      upstream.socket.destroy();
      client.end();
      releaseSlot();
      const release = meter
        .release()
        .catch((error) => log.error({ err: error }, "could not release the session's reservation"));
      ctx.releases.add(release);
      void release.finally(() => ctx.releases.delete(release));
      forgetIdleHold();
      drained();
    },
  });
  if (!ended) forgetIdleHold = idleHoldsOf(ctx).add(agentWallet, providerId, () => relay.releaseIfIdle());
  client.on("close", () => {
    relay.clientGone();
    // A session still draining what its client left upstream is waited for at shutdown, like a release.
    if (ended) return;
    const draining = new Promise<void>((resolve) => (drained = resolve));
    ctx.releases.add(draining);
    void draining.then(() => ctx.releases.delete(draining));
  });
  upstream.socket.on("close", () => {
    if (!ended && !client.destroyed && !relay.closing && !relay.fatalRelayed) {
      client.write(
        errorFrame(SqlState.connectionFailure, "the provider's database closed the connection", {
          fatal: true,
        }),
      );
    }
    relay.end("upstream closed");
  });
  ctx.metrics.sessionsActive.inc();
  ctx.metrics.sessionsTotal.inc();

  client.write(welcomeMessage(upstream, key));
  relay.start(early);
  if (ended) return;
  // Opened while the server drains (for a REST or MCP request, or a connection accepted just before the listener
  // closed): ended after its first answer, not before the query it was opened for.
  const openedDraining = ctx.drain?.draining === true;
  leaveDrain =
    ctx.drain?.add({
      endWhenIdle: () => relay.endWhenIdle(restartFarewell(), "server restarting", !openedDraining),
      endNow: () => {
        // What it left upstream is cancelled, and a write not yet paid is rolled back, as for a client that left.
        if (!client.destroyed) client.write(restartFarewell());
        relay.clientGone();
      },
    }) ?? leaveDrain;
  // A session that opened while the server drains may have ended inside `add`, before `leaveDrain` was set.
  if (ended) leaveDrain();
}
