import type { Duplex } from "node:stream";
import type { AuthenticatedAgent } from "../proxy/agent-session.js";
import { PipelinedSession } from "./pipelined-session.js";

export interface AgentSessionsOptions {
  /**
   * Opens a connection to the proxy for an agent pgtoll has authenticated (`connectInProcess(agent)`).
   * Warning: only for agents whose wallet a request proved; the session acts as that agent.
   */
  connect(agent: AuthenticatedAgent): Duplex;
  /** Opens a connection to the proxy for a CancelRequest (`connectInProcess()`). */
  connectForCancel(): Duplex;
  /** Most sessions one agent keeps with one provider; its queries are pipelined onto them. */
  perAgent: number;
  /** A session that has had no query for this long is closed (its hold goes back to the agent's balance). */
  idleMs: number;
  /** Settings every session starts with (`pgtoll.synchronous_charges`, …). */
  settings: Readonly<Record<string, string>>;
}

/** One agent's sessions with one provider, and those being opened. */
interface AgentPool {
  /** Each open session, with when it was last handed out (performance.now()), for the idle sweep. */
  sessions: Map<PipelinedSession, number>;
  opening: Promise<PipelinedSession>[];
}

/**
 * The proxy sessions an agent's queries run on, per (agent, provider): a query takes a session with nothing
 * waiting, or opens one while the agent has fewer than `perAgent`, or else goes behind the fewest queries (the
 * session pipelines it). Sessions that ended are dropped, and idle ones closed by a sweep, so an agent that stops
 * querying holds no upstream session and no funds.
 */
export class AgentSessions {
  readonly #pools = new Map<string, AgentPool>();
  readonly #sweep: NodeJS.Timeout;
  #closed = false;

  constructor(private readonly options: AgentSessionsOptions) {
    this.#sweep = setInterval(() => this.#closeIdle(), Math.max(10, options.idleMs / 2));
    this.#sweep.unref();
  }

  /** A session to run one of the agent's queries on; rejects with the proxy's refusal when one cannot open. */
  async session(wallet: string, providerId: string): Promise<PipelinedSession> {
    if (this.#closed) throw new Error("the agent sessions are closed");
    const key = `${wallet}/${providerId}`;
    let pool = this.#pools.get(key);
    if (!pool) {
      pool = { sessions: new Map(), opening: [] };
      this.#pools.set(key, pool);
    }
    // No await between choosing and opening: a call right after sees the session being opened.
    const chosen = await (this.#choose(pool) ?? this.#open(pool, key, { wallet, providerId }));
    if (pool.sessions.has(chosen)) pool.sessions.set(chosen, performance.now());
    return chosen;
  }

  /** Sessions open for an agent with a provider. */
  size(wallet: string, providerId: string): number {
    return this.#pools.get(`${wallet}/${providerId}`)?.sessions.size ?? 0;
  }

  /** Closes every session; queries still waiting reject. */
  closeAll(): void {
    this.#closed = true;
    clearInterval(this.#sweep);
    for (const pool of this.#pools.values()) for (const session of pool.sessions.keys()) session.close();
    this.#pools.clear();
  }

  /**
   * An idle session, else (at the agent's limit) the least busy one, or one being opened when none is open yet;
   * undefined when one should be opened.
   */
  #choose(pool: AgentPool): PipelinedSession | Promise<PipelinedSession> | undefined {
    let least: PipelinedSession | undefined;
    for (const session of pool.sessions.keys()) {
      if (session.ended) pool.sessions.delete(session);
      else if (session.pendingQueries === 0) return session;
      else if (!least || session.pendingQueries < least.pendingQueries) least = session;
    }
    if (pool.sessions.size + pool.opening.length < this.options.perAgent) return undefined;
    return least ?? Promise.race(pool.opening);
  }

  /** Opens a session for the pool (`#choose` said it has room). */
  async #open(pool: AgentPool, key: string, agent: AuthenticatedAgent): Promise<PipelinedSession> {
    const opening = PipelinedSession.open(
      this.options.connect(agent),
      { user: agent.wallet, database: agent.providerId, settings: this.options.settings },
      () => this.options.connectForCancel(),
    );
    pool.opening.push(opening);
    try {
      const session = await opening;
      if (this.#closed) session.close();
      else pool.sessions.set(session, performance.now());
      return session;
    } finally {
      pool.opening.splice(pool.opening.indexOf(opening), 1);
      this.#forgetIfEmpty(key, pool);
    }
  }

  /** A pool with no session open or opening is forgotten: an agent that left keeps no entry. */
  #forgetIfEmpty(key: string, pool: AgentPool): void {
    if (pool.sessions.size === 0 && pool.opening.length === 0) this.#pools.delete(key);
  }

  #closeIdle(): void {
    const before = performance.now() - this.options.idleMs;
    for (const [key, pool] of this.#pools) {
      for (const [session, lastUsed] of pool.sessions)
        if (session.ended || (session.pendingQueries === 0 && lastUsed < before)) {
          session.close();
          pool.sessions.delete(session);
        }
      this.#forgetIfEmpty(key, pool);
    }
  }
}
