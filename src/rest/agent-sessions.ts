import type { Duplex } from "node:stream";
import { SqlState } from "../db/sql-state.js";
import type { AuthenticatedAgent } from "../proxy/agent-session.js";
import { PipelinedSession, type TypeParsers } from "./pipelined-session.js";

export interface AgentSessionsOptions {
  /**
   * Opens a connection to the proxy for an agent pgtoll has authenticated (`connectInProcess(agent)`).
   * Warning: only for agents whose wallet a request proved; the session acts as that agent.
   */
  connect(agent: AuthenticatedAgent): Duplex;
  /** Most sessions one agent keeps with one provider; its queries are pipelined onto them. */
  perAgent: number;
  /** A session that has had no query for this long is closed (its hold goes back to the agent's balance). */
  idleMs: number;
  /**
   * A session this old takes no new query and is closed once its queries are answered: what a session checks
   * only as it starts (the provider's role not being a superuser, its connection string) is checked again.
   */
  maxAgeMs: number;
  /** Settings every session starts with (`pgtoll.synchronous_charges`, …). */
  settings: Readonly<Record<string, string>>;
  /** How the sessions read text values (node-postgres's `types` option); node-postgres's own by default. */
  types?: TypeParsers;
}

/**
 * Whose sessions: an agent's with a provider, at one version of the provider's settings (`settings`, e.g. its
 * pricing's update time): a session keeps the settings it started with, so a change takes new sessions.
 */
export interface SessionsKey {
  wallet: string;
  providerId: string;
  settings?: string;
}

const keyOf = (agent: SessionsKey) => `${agent.wallet}/${agent.providerId}/${agent.settings ?? ""}`;

/**
 * How long after closing one of an agent's sessions a new one refused for want of funds is tried again: the
 * closed session's hold goes back to the balance as the proxy ends it, a ledger write later.
 */
const RELEASE_WAIT_MS = 1000;

/** One agent's sessions with one provider, and those being opened. */
interface AgentPool {
  /** Each open session, with when it was last handed out (performance.now()), for the idle sweep. */
  sessions: Map<PipelinedSession, number>;
  opening: Promise<PipelinedSession>[];
  /** Sessions lent for one request alone (`exclusive`): counted against `perAgent`, given no other query. */
  lent: Set<PipelinedSession>;
}

/**
 * The proxy sessions an agent's queries run on, per (agent, provider): a query takes a session with nothing
 * waiting, or opens one while the agent has fewer than `perAgent`, or else goes behind the fewest queries (the
 * session pipelines it). Sessions that ended are dropped, and idle ones closed by a sweep, so an agent that stops
 * querying holds no upstream session and no funds.
 */
export class AgentSessions {
  readonly #pools = new Map<string, AgentPool>();
  readonly #openedAt = new WeakMap<PipelinedSession, number>();
  /** When a session of each pool was last closed here, while its hold may still be on its way back. */
  readonly #closedAt = new Map<string, number>();
  readonly #sweep: NodeJS.Timeout;
  #closed = false;

  constructor(private readonly options: AgentSessionsOptions) {
    this.#sweep = setInterval(() => this.#closeIdle(), Math.max(10, options.idleMs / 2));
    this.#sweep.unref();
  }

  /**
   * A session to run one of the agent's queries on, shared: other queries of the agent's may be pipelined before
   * and after it. Rejects with the proxy's refusal when none is open and none can open.
   */
  async session(agent: SessionsKey): Promise<PipelinedSession> {
    const { pool, key } = this.#pool(agent);
    // No await between choosing and opening: a call right after sees the session being opened.
    const chosen = await (this.#choose(pool, key) ?? this.#openOrShare(agent));
    const current = this.#pools.get(key);
    if (current?.sessions.has(chosen)) current.sessions.set(chosen, performance.now());
    return chosen;
  }

  /**
   * A session for one request alone (one that holds a transaction or changes session state): an idle session of
   * the agent's, a new one, or, when the agent's funds are all held by its open sessions, the least busy of them
   * once its queries are answered. Give it back with `giveBack` when the request left the session as it found
   * it; close it otherwise.
   */
  async exclusive(agent: SessionsKey): Promise<PipelinedSession> {
    const { pool, key } = this.#pool(agent);
    const session = await (this.#choose(pool, key) ?? this.#openOrShare(agent));
    const current = this.#pool(agent).pool;
    current.sessions.delete(session);
    current.lent.add(session);
    await session.drained();
    return session;
  }

  /** Takes back a session lent by `exclusive`, for the agent's next queries. */
  giveBack(agent: SessionsKey, session: PipelinedSession): void {
    const key = keyOf(agent);
    const pool = this.#pools.get(key);
    if (!pool?.lent.delete(session)) return;
    if (session.ended || this.#closed) {
      session.close();
      this.#closedAt.set(key, performance.now());
      this.#forgetIfEmpty(key, pool);
    } else pool.sessions.set(session, performance.now());
  }

  #pool(agent: SessionsKey): { pool: AgentPool; key: string } {
    if (this.#closed) throw new Error("the agent sessions are closed");
    const key = keyOf(agent);
    let pool = this.#pools.get(key);
    if (!pool) {
      pool = { sessions: new Map(), opening: [], lent: new Set() };
      this.#pools.set(key, pool);
    }
    return { pool, key };
  }

  /** Sessions open for an agent with a provider. */
  size(agent: SessionsKey): number {
    return this.#pools.get(keyOf(agent))?.sessions.size ?? 0;
  }

  /** Closes every session; queries still waiting reject. */
  closeAll(): void {
    this.#closed = true;
    clearInterval(this.#sweep);
    for (const pool of this.#pools.values())
      for (const session of [...pool.sessions.keys(), ...pool.lent]) session.close();
    this.#pools.clear();
  }

  /**
   * An idle session, else (at the agent's limit) the least busy one, or one being opened when none is open yet;
   * undefined when one should be opened.
   */
  #choose(pool: AgentPool, key: string): PipelinedSession | Promise<PipelinedSession> | undefined {
    let least: PipelinedSession | undefined;
    const oldest = performance.now() - this.options.maxAgeMs;
    for (const session of pool.sessions.keys()) {
      if (session.ended) {
        // Ended by the proxy (it closed the connection): its hold is on its way back.
        pool.sessions.delete(session);
        this.#closedAt.set(key, performance.now());
      } else if ((this.#openedAt.get(session) ?? 0) < oldest) {
        pool.sessions.delete(session);
        void session.drained().then(() => session.close());
        this.#closedAt.set(key, performance.now());
      } else if (session.pendingQueries === 0) return session;
      else if (!least || session.pendingQueries < least.pendingQueries) least = session;
    }
    if (pool.sessions.size + pool.opening.length + pool.lent.size < this.options.perAgent) return undefined;
    // Every session lent (a transaction of the agent's): one more is opened meanwhile.
    return least ?? (pool.opening.length > 0 ? Promise.race(pool.opening) : undefined);
  }

  /**
   * Opens a session, or shares an open one when the proxy refuses a new one for want of funds: the agent's open
   * sessions already hold what it has (each session holds part of the balance).
   */
  async #openOrShare(agent: SessionsKey): Promise<PipelinedSession> {
    for (let attempt = 0; ; attempt++) {
      // The agent's pool as it is now: one with nothing left is forgotten while a retry waits.
      const { pool, key } = this.#pool(agent);
      try {
        return await this.#open(pool, key, { wallet: agent.wallet, providerId: agent.providerId });
      } catch (error) {
        if ((error as { code?: string }).code !== SqlState.insufficientFunds) throw error;
        // Its other sessions hold the agent's funds: the query goes behind theirs (one being opened, too).
        const shared = this.#leastBusy(pool) ?? (await this.#anyOpening(pool));
        if (shared) return shared;
        // A session of the agent's closed a moment ago gives its hold back to the balance just after it ends.
        const closedAt = this.#closedAt.get(key);
        if (closedAt === undefined || performance.now() - closedAt > RELEASE_WAIT_MS || attempt >= 6)
          throw error;
        await new Promise((resolve) => setTimeout(resolve, 10 * 2 ** attempt));
      }
    }
  }

  /** The first of the pool's sessions being opened to open, if any opens. */
  #anyOpening(pool: AgentPool): Promise<PipelinedSession | undefined> {
    if (pool.opening.length === 0) return Promise.resolve(undefined);
    return Promise.any(pool.opening).catch(() => undefined);
  }

  #leastBusy(pool: AgentPool): PipelinedSession | undefined {
    let least: PipelinedSession | undefined;
    for (const session of pool.sessions.keys())
      if (!session.ended && (!least || session.pendingQueries < least.pendingQueries)) least = session;
    return least;
  }

  /** Opens a session for the pool (`#choose` said it has room). */
  async #open(pool: AgentPool, key: string, agent: AuthenticatedAgent): Promise<PipelinedSession> {
    const opening = PipelinedSession.open(this.options.connect(agent), {
      user: agent.wallet,
      database: agent.providerId,
      settings: this.options.settings,
      ...(this.options.types ? { types: this.options.types } : {}),
    });
    pool.opening.push(opening);
    try {
      const session = await opening;
      if (this.#closed) session.close();
      else {
        pool.sessions.set(session, performance.now());
        this.#openedAt.set(session, performance.now());
      }
      return session;
    } finally {
      pool.opening.splice(pool.opening.indexOf(opening), 1);
      this.#forgetIfEmpty(key, pool);
    }
  }

  /** A pool with no session open, opening or lent is forgotten: an agent that left keeps no entry. */
  #forgetIfEmpty(key: string, pool: AgentPool): void {
    if (pool.sessions.size === 0 && pool.opening.length === 0 && pool.lent.size === 0)
      this.#pools.delete(key);
  }

  #closeIdle(): void {
    const now = performance.now();
    const before = now - this.options.idleMs;
    for (const [key, closedAt] of this.#closedAt)
      if (now - closedAt > RELEASE_WAIT_MS) this.#closedAt.delete(key);
    for (const [key, pool] of this.#pools) {
      for (const [session, lastUsed] of pool.sessions) {
        // Idle since its last answer, not since it was handed out: a long query's session is not closed at its end.
        const idleSince = Math.max(lastUsed, session.idleSince);
        if (session.ended || (session.pendingQueries === 0 && idleSince < before)) {
          session.close();
          pool.sessions.delete(session);
          this.#closedAt.set(key, now);
        }
      }
      this.#forgetIfEmpty(key, pool);
    }
  }
}
