import { randomBytes, timingSafeEqual } from "node:crypto";

interface Entry {
  secret: Buffer;
  cancel(): void;
}

/**
 * The BackendKeyData of client sessions: the upstream backend's real process id (so that `pg_backend_pid()`,
 * BackendKeyData and NotificationResponse agree) and a secret of the proxy's own, random and unique per session.
 * Backends of different provider databases may share a process id, so a CancelRequest is matched on the id and
 * the secret together: it reaches that session's upstream query, and nothing else.
 */
export class SessionRegistry {
  readonly #sessions = new Map<number, Entry[]>();
  readonly #secrets = new Set<string>();

  register(
    processId: number,
    cancel: () => void,
  ): { processId: number; secretKey: Buffer; unregister(): void } {
    let secretKey: Buffer;
    do secretKey = randomBytes(4);
    while (this.#secrets.has(secretKey.toString("hex")));
    const entry: Entry = { secret: secretKey, cancel };
    this.#secrets.add(secretKey.toString("hex"));
    const sharing = this.#sessions.get(processId);
    if (sharing) sharing.push(entry);
    else this.#sessions.set(processId, [entry]);
    let registered = true;
    return {
      processId,
      secretKey,
      unregister: () => {
        if (!registered) return;
        registered = false;
        this.#secrets.delete(secretKey.toString("hex"));
        const left = (this.#sessions.get(processId) ?? []).filter((other) => other !== entry);
        if (left.length > 0) this.#sessions.set(processId, left);
        else this.#sessions.delete(processId);
      },
    };
  }

  /**
   * Cancels the running query of the session with this process id and secret; unknown keys and wrong secrets
   * are ignored, as PostgreSQL does. Every secret under the id is compared in full, in constant time.
   */
  cancel(processId: number, secretKey: Buffer): boolean {
    let found: Entry | undefined;
    for (const entry of this.#sessions.get(processId) ?? []) {
      if (entry.secret.length === secretKey.length && timingSafeEqual(entry.secret, secretKey)) found = entry;
    }
    found?.cancel();
    return found !== undefined;
  }

  /** Sessions registered. */
  get size(): number {
    return this.#secrets.size;
  }
}
