import pg from "pg";
import type { Logger } from "pino";
import { DAILY_LIMIT_CHANNEL } from "./daily-limits.js";

/** A hold of an agent's funds with one provider that a new daily limit must bind. */
export interface LimitBoundHold {
  readonly agentWallet: string;
  readonly providerId: string;
  /** The agent's daily limit with the provider changed (or may have, unseen): hold again within it. */
  limitChanged(): void;
}

/** Where holds sign up to be told of daily limit changes; see {@link DailyLimitWatch}. */
export interface LimitWatch {
  watch(hold: LimitBoundHold): void;
  unwatch(hold: LimitBoundHold): void;
  /**
   * This process changed the agent's limit with the provider: its own holds are told now, not at the
   * notification (which tells the other processes), so that the answer to the change finds them bound.
   */
  changed(agentWallet: string, providerId: string): void;
}

export interface DailyLimitWatchOptions {
  /** The ledger database, where the limits are set (DATABASE_URL). */
  connectionString: string;
  logger?: Logger;
  /** Wait before connecting again after the connection was lost. Default 1000 ms. */
  retryMs?: number;
}

function keyOf(agentWallet: string, providerId: string): string {
  return `${agentWallet.toLowerCase()}/${providerId.toLowerCase()}`;
}

/**
 * The daily limits this process's open holds must obey. A limit is set in the ledger by whichever pgtoll process
 * served the request; the statement that sets it notifies DAILY_LIMIT_CHANNEL, and every process listens there on
 * a connection of its own and tells the holds of that agent and provider, which give back what they hold unspent
 * and hold again under the limit. A notification sent while the connection was down is lost: once connected
 * again, every hold is told, as any limit may have changed meanwhile.
 */
export class DailyLimitWatch implements LimitWatch {
  readonly #holds = new Map<string, Set<LimitBoundHold>>();
  readonly #options: DailyLimitWatchOptions;
  #client: pg.Client | null = null;
  #retry: NodeJS.Timeout | null = null;
  #closed = false;
  #connectedOnce = false;

  constructor(options: DailyLimitWatchOptions) {
    this.#options = options;
  }

  /** Listens; resolves once listening, or once the first attempt failed (it is retried in the background). */
  start(): Promise<void> {
    return this.#connect();
  }

  watch(hold: LimitBoundHold): void {
    const key = keyOf(hold.agentWallet, hold.providerId);
    let holds = this.#holds.get(key);
    if (!holds) {
      holds = new Set();
      this.#holds.set(key, holds);
    }
    holds.add(hold);
  }

  unwatch(hold: LimitBoundHold): void {
    const key = keyOf(hold.agentWallet, hold.providerId);
    const holds = this.#holds.get(key);
    if (!holds) return;
    holds.delete(hold);
    if (holds.size === 0) this.#holds.delete(key);
  }

  changed(agentWallet: string, providerId: string): void {
    this.#tell(keyOf(agentWallet, providerId));
  }

  /** Tells the holds of `key` (or all of them) that their limit changed. */
  #tell(key: string | null): void {
    const sets = key === null ? [...this.#holds.values()] : [this.#holds.get(key)];
    for (const holds of sets) for (const hold of [...(holds ?? [])]) hold.limitChanged();
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client({ connectionString: this.#options.connectionString, keepAlive: true });
    client.on("notification", (message) => {
      if (message.channel === DAILY_LIMIT_CHANNEL && message.payload) this.#tell(message.payload);
    });
    client.on("error", (error) => this.#lost(client, error));
    client.on("end", () => this.#lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${DAILY_LIMIT_CHANNEL}`);
    } catch (error) {
      this.#lost(client, error);
      return;
    }
    if (this.#closed) return void client.end().catch(() => {});
    this.#client = client;
    // Limits set while nothing listened were not heard: every hold takes the ledger's word again.
    if (this.#connectedOnce) this.#tell(null);
    this.#connectedOnce = true;
  }

  #lost(client: pg.Client, error?: unknown): void {
    if (this.#client === client) this.#client = null;
    client.removeAllListeners("end");
    client.on("error", () => {});
    client.end().catch(() => {});
    if (this.#closed || this.#retry) return;
    this.#connectedOnce = true;
    this.#options.logger?.warn(
      { err: error },
      "the ledger connection that hears daily limit changes was lost; connecting again",
    );
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#connect();
    }, this.#options.retryMs ?? 1000);
    this.#retry.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    const client = this.#client;
    this.#client = null;
    if (client) {
      client.removeAllListeners("end");
      await client.end().catch(() => {});
    }
  }
}
