import { randomBytes, randomInt, timingSafeEqual } from "node:crypto";

interface Entry {
  secret: Buffer;
  cancel(): void;
}

/**
 * The proxy's own BackendKeyData: each client session gets a process id and secret that mean nothing upstream.
 * A CancelRequest carrying them reaches that session's upstream query, and nothing else.
 */
export class SessionRegistry {
  readonly #sessions = new Map<number, Entry>();

  register(cancel: () => void): { processId: number; secretKey: Buffer; unregister(): void } {
    let processId: number;
    do processId = randomInt(1, 2 ** 31 - 1);
    while (this.#sessions.has(processId));
    const secretKey = randomBytes(4);
    this.#sessions.set(processId, { secret: secretKey, cancel });
    return { processId, secretKey, unregister: () => this.#sessions.delete(processId) };
  }

  /** Cancels the session's running query when the key matches; unknown keys are ignored, as PostgreSQL does. */
  cancel(processId: number, secretKey: Buffer): boolean {
    const entry = this.#sessions.get(processId);
    if (!entry || entry.secret.length !== secretKey.length || !timingSafeEqual(entry.secret, secretKey))
      return false;
    entry.cancel();
    return true;
  }

  get size(): number {
    return this.#sessions.size;
  }
}
