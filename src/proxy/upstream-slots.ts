/** Thrown when a session waited longer than the queue timeout for an upstream slot. */
export class SlotTimeoutError extends Error {
  override name = "SlotTimeoutError";
}

interface Waiter {
  resolve(release: () => void): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * Caps concurrent upstream sessions per provider, like PgBouncer's pool_size in session mode: a client
 * session beyond the cap waits (FIFO) for one to end, up to a timeout, rather than failing on the
 * provider's max_connections.
 */
export class UpstreamSlots {
  readonly #inUse = new Map<string, number>();
  readonly #waiting = new Map<string, Waiter[]>();

  constructor(
    private readonly limit: number,
    private readonly waitTimeoutMs: number,
  ) {}

  /** Resolves with the function that gives the slot back; call it exactly once. */
  acquire(providerId: string): Promise<() => void> {
    const used = this.#inUse.get(providerId) ?? 0;
    if (used < this.limit) {
      this.#inUse.set(providerId, used + 1);
      return Promise.resolve(this.#releaser(providerId));
    }
    return new Promise((resolve, reject) => {
      const queue = this.#waiting.get(providerId) ?? [];
      this.#waiting.set(providerId, queue);
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          queue.splice(queue.indexOf(waiter), 1);
          reject(
            new SlotTimeoutError(
              `all ${this.limit} upstream sessions of this provider are busy; waited ${this.waitTimeoutMs} ms`,
            ),
          );
        }, this.waitTimeoutMs),
      };
      queue.push(waiter);
    });
  }

  #releaser(providerId: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.get(providerId)?.shift();
      if (next) {
        clearTimeout(next.timer);
        next.resolve(this.#releaser(providerId));
        return;
      }
      const used = (this.#inUse.get(providerId) ?? 1) - 1;
      if (used === 0) this.#inUse.delete(providerId);
      else this.#inUse.set(providerId, used);
    };
  }

  inUse(providerId: string): number {
    return this.#inUse.get(providerId) ?? 0;
  }

  waiting(providerId: string): number {
    return this.#waiting.get(providerId)?.length ?? 0;
  }
}
