import { BlockList, isIP } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";

/**
 * Reads a comma-separated list of addresses and CIDR ranges (`10.0.0.0/8, 192.0.2.7, fd00::/8`), as
 * PGTOLL_TRUSTED_PROXIES gives it. Throws an Error naming the first entry that is neither.
 */
export function parseCidrList(raw: string): string[] {
  const entries = raw
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  for (const entry of entries) {
    const [base = "", bits, extra] = entry.split("/");
    const family = isIP(base);
    const bitsOk =
      bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
    if (!family || !bitsOk || extra !== undefined)
      throw new Error(`"${entry}" is not an IP address or a CIDR range (10.0.0.0/8)`);
  }
  return entries;
}

/** Whether a peer address is in `entries` (addresses and CIDR ranges, as `parseCidrList` returns them). */
export function addressMatcher(entries: readonly string[]): (address: string | undefined) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const [base = "", bits] = entry.split("/");
    const family = isIP(base) === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) list.addAddress(base, family);
    else list.addSubnet(base, Number(bits), family);
  }
  return (address) => {
    if (!address) return false;
    const peer = canonicalAddress(address);
    const family = isIP(peer);
    return family !== 0 && list.check(peer, family === 4 ? "ipv4" : "ipv6");
  };
}
