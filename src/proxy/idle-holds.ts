/**
 * Gives back the hold of one session if it is idle now (no query pending, nothing from its client since its last
 * answer), returning the release's promise; undefined when the session is busy or holds nothing to give.
 */
export type ReleaseIfIdle = () => Promise<void> | undefined;

/**
 * The sessions of this process that may sit idle on an agent's funds, per agent and provider. A session keeps
 * its hold for a while once idle (30 s on the wire, 100 ms for REST's), so that the agent's next statement needs
 * no ledger round trip; funds held so are the agent's all the same. When another session of the same agent and
 * provider finds the available balance short (at its startup, or topping up its hold), it reclaims them: each
 * idle session gives its hold back at once, and the short one tries again once those releases are written.
 *
 * Only this process's sessions are reached: a hold idle in another pgtoll process comes back after its own idle
 * spell.
 */
export class IdleHolds {
  readonly #byAgent = new Map<string, Set<ReleaseIfIdle>>();

  /** Registers a session of the agent's with the provider; returns what unregisters it (at its end). */
  add(agentWallet: string, providerId: string, releaseIfIdle: ReleaseIfIdle): () => void {
    const key = keyOf(agentWallet, providerId);
    let sessions = this.#byAgent.get(key);
    if (!sessions) {
      sessions = new Set();
      this.#byAgent.set(key, sessions);
    }
    sessions.add(releaseIfIdle);
    return () => {
      sessions.delete(releaseIfIdle);
      if (sessions.size === 0 && this.#byAgent.get(key) === sessions) this.#byAgent.delete(key);
    };
  }

  /**
   * Has every idle session of the agent's with the provider give its hold back; resolves once those releases are
   * written (a failed one is left to the charge writer and the hold's expiry). Undefined when none was idle.
   */
  reclaim(agentWallet: string, providerId: string): Promise<void> | undefined {
    const sessions = this.#byAgent.get(keyOf(agentWallet, providerId));
    if (!sessions) return undefined;
    const releases: Promise<void>[] = [];
    for (const releaseIfIdle of sessions) {
      const release = releaseIfIdle();
      if (release) releases.push(release.catch(() => undefined));
    }
    return releases.length === 0 ? undefined : Promise.all(releases).then(() => undefined);
  }

  /** Agents with a registered session, for tests: an entry outlives none of its sessions. */
  get size(): number {
    return this.#byAgent.size;
  }
}

const keyOf = (agentWallet: string, providerId: string) => `${agentWallet}/${providerId}`;

/** One registry per proxy (its context object): the sessions of one process that share its agents' funds. */
const registries = new WeakMap<object, IdleHolds>();

export function idleHoldsOf(proxy: object): IdleHolds {
  let holds = registries.get(proxy);
  if (!holds) {
    holds = new IdleHolds();
    registries.set(proxy, holds);
  }
  return holds;
}
