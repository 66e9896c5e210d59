/** PGTOLL_MAX_RESULTS_IN_MEMORY's default: what the REST gateway's results may hold in memory at once, 256 MiB. */
export const DEFAULT_MAX_RESULTS_IN_MEMORY = 256 * 1024 * 1024;

/**
 * A provider's data was refused because the process already holds its most result bytes for other requests
 * (PGTOLL_MAX_RESULTS_IN_MEMORY): the request may be tried again once they are answered.
 */
export class ResultMemoryFullError extends Error {
  override name = "ResultMemoryFullError";

  constructor(readonly maxBytes: number) {
    super(`pgtoll holds its most result bytes in memory (${maxBytes} bytes) for other requests`);
  }
}

/**
 * The bytes of provider results the REST gateway holds at once, for the whole process: each request's rows from
 * their arrival to its answer (see {@link ResultLease}), and each large message while node-postgres assembles it
 * (message-gate.ts). One request's cap (PGTOLL_MAX_RESULT_BYTES) bounds a request; this bounds them all
 * together, whatever the number of providers and of their pools' connections.
 */
export class ResultMemory {
  #heldBytes = 0;

  constructor(
    /** Most bytes held at once (PGTOLL_MAX_RESULTS_IN_MEMORY). */
    readonly maxBytes: number,
  ) {}

  get heldBytes(): number {
    return this.#heldBytes;
  }

  /** Takes `bytes` if they fit under the limit; false, taking nothing, if they do not. */
  take(bytes: number): boolean {
    if (this.#heldBytes + bytes > this.maxBytes) return false;
    this.#heldBytes += bytes;
    return true;
  }

  give(bytes: number): void {
    this.#heldBytes -= bytes;
  }

  /** A request's share, within its own cap of `maxRequestBytes` (PGTOLL_MAX_RESULT_BYTES). */
  lease(maxRequestBytes: number): ResultLease {
    return new ResultLease(this, maxRequestBytes);
  }
}

/** What a request's rows hold of the process's {@link ResultMemory}; `release` when the request is answered. */
export class ResultLease {
  #heldBytes = 0;

  constructor(
    private readonly memory: ResultMemory,
    /** The request's own cap (PGTOLL_MAX_RESULT_BYTES). */
    readonly maxBytes: number,
  ) {}

  /**
   * Adds a row's bytes: undefined when they fit, else which limit they pass ("request": its own cap, "process":
   * the process's), and nothing is added.
   */
  add(bytes: number): "request" | "process" | undefined {
    if (this.#heldBytes + bytes > this.maxBytes) return "request";
    if (!this.memory.take(bytes)) return "process";
    this.#heldBytes += bytes;
    return undefined;
  }

  /** The process's limit (PGTOLL_MAX_RESULTS_IN_MEMORY), for the refusal's message. */
  get processMaxBytes(): number {
    return this.memory.maxBytes;
  }

  /** Gives back what the request held. Idempotent. */
  release(): void {
    this.memory.give(this.#heldBytes);
    this.#heldBytes = 0;
  }
}
