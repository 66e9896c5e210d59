import { BlockList, isIP } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";
import { badRequest } from "./control-error.js";
import type { PlannedOperation } from "./operations.js";

/** A project's `settings.allowed_ips` (Neon's shape): who may open sessions to its endpoints. */
export interface IpAllowlist {
  /** Single addresses, CIDR ranges (`203.0.113.0/24`) and dash ranges (`203.0.113.5-203.0.113.9`), v4 or v6. */
  ips: string[];
  /** Only the project's protected branches are restricted. */
  protectedBranchesOnly: boolean;
}

/** An IPv4-mapped address, however spelled, is its IPv4 address (canonicalAddress). */
const plainAddress = canonicalAddress;

function family(address: string): "ipv4" | "ipv6" | null {
  const kind = isIP(address);
  return kind === 4 ? "ipv4" : kind === 6 ? "ipv6" : null;
}

/** Adds one entry to `list`; false when the entry is not an address, a CIDR range or a dash range. */
function addEntry(list: BlockList, raw: string): boolean {
  const entry = raw.trim();
  const slash = entry.indexOf("/");
  if (slash > 0) {
    const base = plainAddress(entry.slice(0, slash));
    const kind = family(base);
    const bits = entry.slice(slash + 1);
    if (!kind || !/^\d{1,3}$/.test(bits) || Number(bits) > (kind === "ipv4" ? 32 : 128)) return false;
    list.addSubnet(base, Number(bits), kind);
    return true;
  }
  const dash = entry.indexOf("-");
  if (dash > 0) {
    const [start, end] = [
      plainAddress(entry.slice(0, dash).trim()),
      plainAddress(entry.slice(dash + 1).trim()),
    ];
    const kind = family(start);
    if (!kind || family(end) !== kind) return false;
    try {
      list.addRange(start, end, kind);
    } catch {
      return false; // the end before the start
    }
    return true;
  }
  const address = plainAddress(entry);
  const kind = family(address);
  if (!kind) return false;
  list.addAddress(address, kind);
  return true;
}

/** The allowlist of a project's settings, or null when it restricts nothing (absent or an empty list). */
export function allowlistOf(settings: unknown): IpAllowlist | null {
  const allowed = (settings as { allowed_ips?: { ips?: unknown; protected_branches_only?: unknown } } | null)
    ?.allowed_ips;
  const ips = Array.isArray(allowed?.ips)
    ? allowed.ips.filter((ip): ip is string => typeof ip === "string")
    : [];
  if (ips.length === 0) return null;
  return { ips, protectedBranchesOnly: allowed?.protected_branches_only === true };
}

/** Refuses (400) settings whose `allowed_ips.ips` holds an entry that is no address or range. */
export function checkAllowedIps(settings: unknown): void {
  const ips = (settings as { allowed_ips?: { ips?: unknown } } | null)?.allowed_ips?.ips;
  if (ips === undefined) return;
  if (!Array.isArray(ips)) throw badRequest("settings.allowed_ips.ips must be a list of addresses or ranges");
  for (const ip of ips) {
    if (typeof ip !== "string" || !addEntry(new BlockList(), ip))
      throw badRequest(
        `settings.allowed_ips.ips: "${String(ip)}" is not an IP address, a CIDR range (203.0.113.0/24) or a range (203.0.113.5-203.0.113.9)`,
      );
  }
}

/** Whether a session from `address` to a branch (protected or not) passes the allowlist. */
export function addressAllowed(list: IpAllowlist | null, branchProtected: boolean, address: string): boolean {
  if (!list || (list.protectedBranchesOnly && !branchProtected)) return true;
  const blockList = new BlockList();
  for (const entry of list.ips) addEntry(blockList, entry);
  const plain = plainAddress(address);
  const kind = family(plain);
  return kind !== null && blockList.check(plain, kind);
}

/** What Neon answers a client its allowlist refuses. */
export function ipNotAllowedMessage(address: string): string {
  return `This IP address ${plainAddress(address)} is not allowed to connect to this endpoint. Please add it to the allowed list (settings.allowed_ips of the project). Make sure to check for IPv4 or IPv6 addresses.`;
}

/** The operation that ends the project's open sessions its allowlist, as it is now, no longer admits. */
export function endDisallowedSessions(projectId: string): PlannedOperation {
  return { action: "apply_config", step: { kind: "end_disallowed_sessions", projectId } };
}
