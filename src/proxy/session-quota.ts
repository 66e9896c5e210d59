import { addressKey } from "./unauthenticated-connections.js";

export interface SessionQuotaOptions {
  /** Sessions per client address at most; 0: no limit per address. */
  perAddress: number;
  /** Sessions at most, all addresses together. */
  total: number;
  /** Of `total`, how many only funded sessions may take. Default 0. */
  reservedForFunded?: number;
  /** Addresses not limited per address (they still count towards `total`). */
  exempt?(address: string): boolean;
}

/** Why a session was not given a place: the limit it reached. */
export interface QuotaRefusal {
  scope: "address" | "total" | "unfunded";
  limit: number;
}

/**
 * Open sessions per client address and in total (wire-proxy connections, remote MCP sessions), with a share of
 * the total kept for funded sessions. Counts live in this process: behind a load balancer each process holds
 * its own share of the clients.
 */
export class SessionQuota {
  readonly #perAddress = new Map<string, number>();
  #total = 0;
  #unfunded = 0;

  constructor(private readonly options: SessionQuotaOptions) {}

  /** A place for a session from `address`, and the function that gives it back (once); or the limit reached. */
  take(rawAddress: string | undefined, funded = true): { release(): void } | QuotaRefusal {
    const { perAddress, total } = this.options;
    // One client as the caps on unauthenticated connections count one: an IPv4 address or an IPv6 /64.
    const address = addressKey(rawAddress);
    const unfundedCap = total - Math.min(total, this.options.reservedForFunded ?? 0);
    if (this.#total >= total) return { scope: "total", limit: total };
    if (!funded && this.#unfunded >= unfundedCap) return { scope: "unfunded", limit: unfundedCap };
    const limited = perAddress > 0 && !this.options.exempt?.(rawAddress ?? "");
    const mine = this.#perAddress.get(address) ?? 0;
    if (limited && mine >= perAddress) return { scope: "address", limit: perAddress };
    this.#total++;
    if (!funded) this.#unfunded++;
    if (limited) this.#perAddress.set(address, mine + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#total--;
        if (!funded) this.#unfunded--;
        if (!limited) return;
        const left = (this.#perAddress.get(address) ?? 1) - 1;
        if (left === 0) this.#perAddress.delete(address);
        else this.#perAddress.set(address, left);
      },
    };
  }

  get size(): number {
    return this.#total;
  }
}

export function isQuotaRefusal(place: { release(): void } | QuotaRefusal): place is QuotaRefusal {
  return "scope" in place;
}
