import { AgentHold } from "../billing/agent-hold.js";
import type { ChargeWriter } from "../billing/charge-writer.js";
import type { LimitWatch } from "../billing/daily-limit-watch.js";
import type { Queryable } from "../billing/ledger.js";

export interface HeldFundsOptions {
  ledger: Queryable;
  /** Group commit of the charges of requests that share a hold. */
  writer: ChargeWriter;
  reservationTtlSeconds: number;
  /** Tells the holds of daily limit changes made in any process. */
  limits?: LimitWatch;
  /** How long a shared hold outlives its last request, waiting for the agent's next one. Default 50 ms. */
  lingerMs?: number;
  /** Told about a failure to release a hold in the background (the reservation then expires on its own). */
  onReleaseError?: (error: unknown) => void;
}

/** How long a REST query's charge is retried while the ledger is unavailable before the request fails. */
const CHARGE_RETRY_MS = 5000;

/** One agent's funds held with one provider by this process, for that agent's requests. */
interface Hold {
  key: string;
  funds: AgentHold;
  /** Requests that joined and whose charge is not yet durable. */
  members: number;
  /** Had two requests at once: its charges are group-committed and it lingers after the last one. */
  shared: boolean;
  /** After this instant new requests open a hold of their own, so no reservation outlives its expiry. */
  joinableUntil: number;
  linger: NodeJS.Timeout | null;
}

/**
 * Two-phase charging for `POST /api/query`, over one {@link AgentHold} per agent and provider: a request covers
 * its cost from the hold before it may run (and again, for its actual cost, before its result is committed or
 * returned), then charges exactly that cost. What the REST gateway adds to the hold:
 *
 * - An answer waits for its charge's commit: `charge` resolves only once the entry is in the ledger.
 * - A lone request reserves what it expects to cost, and its charge releases the rest in the same statement
 *   (releaseWithCharge), before its answer: nothing stays held after it.
 * - Requests of one agent that run at the same time, or one right after another (within `lingerMs` of a lone
 *   request's end: a busy agent), share one hold instead (held in SQL like any other, so the balance never goes
 *   below zero, whatever runs elsewhere): each takes what it needs from it without a round trip, tops it up by
 *   `chunkMicro` when it runs low, and has its charge written by the group-committing ChargeWriter. A busy agent
 *   so costs one ledger statement per batch of requests rather than several per request.
 * - A busy agent's hold lingers: it is released `lingerMs` after its last request unless another came (at once,
 *   before the answer, when that request was refused or charged nothing). Until then its funds are not available
 *   to the agent's requests in other processes (here, a request that falls short waits for it), and beyond what
 *   a request needs it takes at most a quarter of the available balance.
 */
export class HeldFunds {
  readonly #holds = new Map<string, Hold>();
  /** Releases in flight, per agent and provider: a reservation that falls short waits for them and tries again. */
  readonly #closing = new Map<string, Set<Promise<void>>>();
  /**
   * When each agent's last lone request ended (performance.now()), per agent and provider: a request that comes
   * within `lingerMs` of it is a busy agent's, whose hold then lingers like a shared one. Pruned as it grows.
   */
  readonly #loneEnded = new Map<string, number>();
  readonly #lingerMs: number;

  constructor(private readonly options: HeldFundsOptions) {
    this.#lingerMs = options.lingerMs ?? 50;
  }

  /** Starts one request's use of the agent's funds; end it with `charge` or `release`. */
  join(agentWallet: string, providerId: string, chunkMicro: bigint): RequestFunds {
    const key = `${agentWallet}/${providerId}`;
    const chunk = chunkMicro > 0n ? chunkMicro : 1n;
    let hold = this.#holds.get(key);
    const now = performance.now();
    if (!hold || now > hold.joinableUntil) {
      const lastLone = this.#loneEnded.get(key);
      hold = {
        key,
        funds: new AgentHold(this.options.ledger, this.options.writer, agentWallet, providerId, {
          ttlSeconds: this.options.reservationTtlSeconds,
          baseMicro: chunk,
          // Beyond what the request needs, a hold takes at most a quarter of what is available.
          fairShareAboveMicro: 0n,
          releasesInFlight: () => this.#releasesOf(key),
          ...(this.options.limits ? { limits: this.options.limits } : {}),
        }),
        members: 0,
        // A busy agent (its last request ended just now): its requests share a hold over time, not only at once.
        shared: lastLone !== undefined && now - lastLone <= this.#lingerMs,
        joinableUntil: performance.now() + (this.options.reservationTtlSeconds * 1000) / 4,
        linger: null,
      };
      this.#holds.set(key, hold);
    }
    if (hold.linger) {
      clearTimeout(hold.linger);
      hold.linger = null;
    }
    if (++hold.members > 1) hold.shared = true;
    return new RequestFunds(this, hold, chunk);
  }

  /** Releases every hold now (shutdown), after the charges already queued. */
  async closeAll(): Promise<void> {
    for (const hold of [...this.#holds.values()]) {
      if (hold.members === 0) this.#close(hold);
    }
    await Promise.allSettled([...this.#closing.values()].flatMap((releases) => [...releases]));
  }

  /** The releases of `key`'s holds in flight, when there are: the agent's funds may still sit there. */
  #releasesOf(key: string): Promise<unknown> | undefined {
    const releases = this.#closing.get(key);
    return releases && Promise.allSettled([...releases]);
  }

  /**
   * Ends one request's membership with its charge (0 for none), and resolves once that charge is durable: an
   * answer with `actualCost` is only sent for a charge that is in the ledger. Alone: the charge and the release
   * are one statement. Shared: the charge goes into the next group commit, which this waits for.
   */
  async finish(hold: Hold, costMicro: bigint, metadata: Record<string, unknown>): Promise<void> {
    if (hold.members === 1 && !hold.shared) {
      // Alone: charge and release in one statement, before the answer, so nothing stays held.
      hold.members = 0;
      if (this.#holds.get(hold.key) === hold) this.#holds.delete(hold.key);
      this.#rememberLoneEnd(hold.key);
      return this.#track(
        hold.key,
        hold.funds.release(() => ({ costMicro, metadata })),
      );
    }
    // Shared: the cost is already held in the reservation; the group commit writes the charge (the wire proxy
    // does the same), and the hold is released only after it.
    const written = costMicro > 0n ? this.#enqueue(hold, costMicro, metadata) : undefined;
    if (--hold.members === 0) {
      // A last request that was refused or charged nothing leaves nothing to wait for: the hold goes before its
      // answer, as a lone request's does. Otherwise it waits `lingerMs` for the agent's next request.
      if (costMicro === 0n || performance.now() > hold.joinableUntil) {
        await written;
        return this.#close(hold);
      }
      hold.linger = setTimeout(() => void this.#close(hold), this.#lingerMs);
    }
    await written;
  }

  #rememberLoneEnd(key: string): void {
    const now = performance.now();
    if (this.#loneEnded.size >= 10_000)
      for (const [other, ended] of this.#loneEnded)
        if (now - ended > this.#lingerMs) this.#loneEnded.delete(other);
    this.#loneEnded.delete(key);
    this.#loneEnded.set(key, now);
  }

  /** Queues a charge on the writer; resolves once it is written, rejects when it could not be. */
  #enqueue(hold: Hold, costMicro: bigint, metadata: Record<string, unknown>): Promise<void> {
    return new Promise((resolve, reject) =>
      hold.funds.queue(
        // The request waits for it: a few seconds of a ledger restart are bridged, not minutes.
        { costMicro, metadata, retryForMs: CHARGE_RETRY_MS },
        (error) => (error ? reject(error) : resolve()),
      ),
    );
  }

  /** Releases an idle shared hold in the background. */
  #close(hold: Hold): Promise<void> {
    if (hold.linger) clearTimeout(hold.linger);
    hold.linger = null;
    if (this.#holds.get(hold.key) === hold) this.#holds.delete(hold.key);
    return this.#track(hold.key, hold.funds.release()).catch((error) => this.options.onReleaseError?.(error));
  }

  /** Remembers a release in flight until it ends. */
  #track(key: string, release: Promise<void>): Promise<void> {
    const releases = this.#closing.get(key) ?? new Set<Promise<void>>();
    this.#closing.set(key, releases);
    releases.add(release);
    const done = () => {
      releases.delete(release);
      if (releases.size === 0 && this.#closing.get(key) === releases) this.#closing.delete(key);
    };
    release.then(done, done);
    return release;
  }
}

/** One request's share of a {@link HeldFunds} hold. */
export class RequestFunds {
  /** Promised to this request and not charged yet. */
  #taken = 0n;
  /** The hold's `limitChanges` when this request first took from it. */
  #takenAt = 0;
  #finished = false;

  constructor(
    private readonly funds: HeldFunds,
    private readonly hold: Hold,
    private readonly chunkMicro: bigint,
  ) {}

  /**
   * Makes sure this request holds `totalMicro` in all, reserving more if needed: up to `wantMicro` (what the
   * request expects to cost) when it is alone, a chunk when the agent has other requests running. False when
   * the balance cannot cover `totalMicro`.
   */
  async cover(totalMicro: bigint, wantMicro = totalMicro): Promise<boolean> {
    const funds = this.hold.funds;
    if (this.#taken === 0n) this.#takenAt = funds.limitChanges;
    const before = this.#taken;
    while (this.#taken < totalMicro) {
      this.#taken += funds.take(totalMicro - this.#taken);
      if (this.#taken >= totalMicro) break;
      const wanted = (wantMicro > totalMicro ? wantMicro : totalMicro) - this.#taken;
      if (!(await funds.cover(totalMicro - this.#taken, this.hold.shared ? this.chunkMicro : wanted))) {
        // What this call took goes back: a later request of the agent may be cheaper and payable. What earlier
        // calls covered stays, for what the request already used (its time).
        funds.giveBack(this.#taken - before, this.#takenAt);
        this.#taken = before;
        return false;
      }
    }
    return true;
  }

  /**
   * Makes this request hold as much as there is up to `totalMicro`, the agent's whole available balance (within
   * its daily limit) if need be: what bounds a statement's time. Resolves to what it holds in all.
   */
  async coverAvailable(totalMicro: bigint): Promise<bigint> {
    const funds = this.hold.funds;
    if (this.#taken < totalMicro) this.#taken += funds.take(totalMicro - this.#taken);
    if (this.#taken < totalMicro) {
      await funds.takeAvailable(totalMicro - this.#taken);
      this.#taken += funds.take(totalMicro - this.#taken);
    }
    return this.#taken;
  }

  /** What this request holds and has not charged. */
  get coveredMicro(): bigint {
    return this.#taken;
  }

  /**
   * Charges `costMicro` (at most what `cover` secured) with one ledger entry holding `metadata`, and ends the
   * request's share (see {@link HeldFunds.finish} for when the entry is written).
   */
  async charge(costMicro: bigint, metadata: Record<string, unknown>): Promise<void> {
    if (this.#finished) throw new Error("this request's funds were already charged or released");
    if (costMicro > this.#taken)
      throw new Error(`a charge of ${costMicro} exceeds the ${this.#taken} covered`);
    this.#finished = true;
    this.hold.funds.giveBack(this.#taken - costMicro, this.#takenAt);
    this.#taken = 0n;
    await this.funds.finish(this.hold, costMicro, metadata);
  }

  /** Ends the request's share without charging anything. Does nothing after `charge`. */
  async release(): Promise<void> {
    if (!this.#finished) await this.charge(0n, {});
  }
}
