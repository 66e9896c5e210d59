import { isIP } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";
import { isLoopback } from "./loopback.js";

export interface UnauthenticatedLimits {
  /** Connections authenticating at once, at most; a new one beyond it closes the one that has waited longest. */
  total: number;
  /**
   * Connections authenticating at once from one client address (an IPv6 /64 counts as one address), at most; a new
   * one beyond it is refused. 0: no cap. Loopback is never capped: pgtoll's own MCP endpoint connects from there on
   * behalf of every remote agent. Warning: behind a TCP load balancer every client has the balancer's address.
   */
  perAddress: number;
}

/**
 * The connections that have not authenticated yet, counted per client address and in all, so that one client
 * cannot take every connection slot with sockets that never log in, and idle sockets cannot lock honest clients
 * out: when the total is reached, the connection that has waited longest makes room (honest clients authenticate in
 * milliseconds, so it is an idle or stalled one).
 */
export class UnauthenticatedConnections {
  /** In arrival order: the first entry has waited longest. */
  readonly #waiting = new Map<symbol, { address: string | null; evict: () => void }>();
  readonly #perAddress = new Map<string, number>();

  constructor(readonly limits: UnauthenticatedLimits) {}

  /** Connections counted now. */
  get size(): number {
    return this.#waiting.size;
  }

  /**
   * Counts a new connection from `address`. Returns null when its address is at its cap (refuse it); otherwise
   * the function that stops counting it (call it once it has authenticated or closed; calling again does
   * nothing). `evict` closes the connection, should it be the one that has waited longest when the total is reached.
   */
  admit(address: string | undefined, evict: () => void): (() => void) | null {
    const key = this.limits.perAddress > 0 && !isLoopback(address) ? addressKey(address) : null;
    if (key !== null && (this.#perAddress.get(key) ?? 0) >= this.limits.perAddress) return null;
    for (const [oldest, entry] of this.#waiting) {
      if (this.#waiting.size < this.limits.total) break;
      this.#forget(oldest);
      entry.evict();
    }
    const ticket = Symbol("unauthenticated connection");
    this.#waiting.set(ticket, { address: key, evict });
    if (key !== null) this.#perAddress.set(key, (this.#perAddress.get(key) ?? 0) + 1);
    return () => this.#forget(ticket);
  }

  #forget(ticket: symbol): void {
    const entry = this.#waiting.get(ticket);
    if (!entry) return;
    this.#waiting.delete(ticket);
    if (entry.address === null) return;
    const left = (this.#perAddress.get(entry.address) ?? 1) - 1;
    if (left > 0) this.#perAddress.set(entry.address, left);
    else this.#perAddress.delete(entry.address);
  }
}

/**
 * What the per-address cap counts as one client: an IPv4 address (IPv4-mapped IPv6 included), or the /64 prefix of
 * an IPv6 address, the block one subscriber usually holds.
 */
export function addressKey(address: string | undefined): string {
  if (!address) return "unknown";
  const lower = canonicalAddress(address).toLowerCase();
  if (isIP(lower) !== 6) return lower;
  const [head = "", tail = ""] = lower.split("::");
  const headGroups = head ? head.split(":") : [];
  const tailGroups = lower.includes("::") ? (tail ? tail.split(":") : []) : [];
  // A trailing dotted IPv4 part stands for two groups.
  const width = (groups: string[]) => groups.reduce((sum, group) => sum + (group.includes(".") ? 2 : 1), 0);
  const groups = [
    ...headGroups,
    ...Array(8 - width(headGroups) - width(tailGroups)).fill("0"),
    ...tailGroups,
  ];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
