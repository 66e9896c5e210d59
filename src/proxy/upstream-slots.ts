/** Thrown when a session waited longer than the queue timeout for an upstream slot. */
export class SlotTimeoutError extends Error {
  override name = "SlotTimeoutError";
}

interface Waiter {
  /** May not take the funded share of the pool. */
  limited: boolean;
  resolve(release: () => void): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

interface Pool {
  inUse: number;
  /** Slots held by limited sessions (counted in `inUse` too). */
  limitedInUse: number;
  waiting: Waiter[];
}

const LIMITED = "\u0000limited";

/**
 * The slot key of a session that may not take the funded share of `pool` (a free-tier session: a provider
 * that charges nothing, an agent with no balance): it waits while only that share is left.
 */
export function limitedSlotKey(pool: string): string {
  return `${pool}${LIMITED}`;
}

/**
 * Caps concurrent upstream sessions per provider, like PgBouncer's pool_size in session mode: a client
 * session beyond the cap waits (FIFO) for one to end, up to a timeout, rather than failing on the
 * provider's max_connections. `reservedForFunded` of each pool's `limit` slots are never given to a limited
 * session ({@link limitedSlotKey}), so sessions that cost nothing cannot take every slot from paying agents;
 * a slot given back goes to the first waiter that may take it.
 */
export class UpstreamSlots {
  readonly #pools = new Map<string, Pool>();
  readonly #limitedCap: number;

  constructor(
    private readonly limit: number,
    private readonly waitTimeoutMs: number,
    reservedForFunded = 0,
  ) {
    this.#limitedCap = limit - Math.min(Math.max(0, reservedForFunded), limit);
  }

  /** Sessions waiting for a slot now, all providers. */
  get totalWaiting(): number {
    let waiting = 0;
    for (const pool of this.#pools.values()) waiting += pool.waiting.length;
    return waiting;
  }

  /** Resolves with the function that gives the slot back; call it exactly once. */
  acquire(key: string): Promise<() => void> {
    const limited = key.endsWith(LIMITED);
    const name = limited ? key.slice(0, -LIMITED.length) : key;
    let pool = this.#pools.get(name);
    if (!pool) {
      pool = { inUse: 0, limitedInUse: 0, waiting: [] };
      this.#pools.set(name, pool);
    }
    // Every waiter that fits is served as a slot comes back, so a newcomer that fits passes no one.
    if (this.#fits(pool, limited)) {
      this.#take(pool, limited);
      return Promise.resolve(this.#releaser(name, pool, limited));
    }
    const queue = pool.waiting;
    const entry = pool;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        limited,
        resolve,
        reject,
        timer: setTimeout(() => {
          queue.splice(queue.indexOf(waiter), 1);
          this.#forgetIfIdle(name, entry);
          const which = limited
            ? `the ${this.#limitedCap} upstream sessions of this provider open to sessions that pay nothing are busy`
            : `all ${this.limit} upstream sessions of this provider are busy`;
          reject(new SlotTimeoutError(`${which}; waited ${this.waitTimeoutMs} ms`));
        }, this.waitTimeoutMs),
      };
      queue.push(waiter);
    });
  }

  #fits(pool: Pool, limited: boolean): boolean {
    return pool.inUse < this.limit && (!limited || pool.limitedInUse < this.#limitedCap);
  }

  #take(pool: Pool, limited: boolean): void {
    pool.inUse++;
    if (limited) pool.limitedInUse++;
  }

  #releaser(name: string, pool: Pool, limited: boolean): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      pool.inUse--;
      if (limited) pool.limitedInUse--;
      for (;;) {
        const next = pool.waiting.findIndex((waiter) => this.#fits(pool, waiter.limited));
        if (next < 0) break;
        const [waiter] = pool.waiting.splice(next, 1) as [Waiter];
        clearTimeout(waiter.timer);
        this.#take(pool, waiter.limited);
        waiter.resolve(this.#releaser(name, pool, waiter.limited));
      }
      this.#forgetIfIdle(name, pool);
    };
  }

  #forgetIfIdle(name: string, pool: Pool): void {
    if (pool.inUse === 0 && pool.waiting.length === 0) this.#pools.delete(name);
  }

  inUse(providerId: string): number {
    return this.#pools.get(providerId)?.inUse ?? 0;
  }

  waiting(providerId: string): number {
    return this.#pools.get(providerId)?.waiting.length ?? 0;
  }
}
