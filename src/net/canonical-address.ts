import { isIP } from "node:net";

const MAPPED_PREFIX = "::ffff:";

/**
 * A client address in the one spelling every rule compares: an IPv4-mapped IPv6 address, however written
 * (`::ffff:1.2.3.4`, `::ffff:102:304`, `0:0:0:0:0:ffff:0102:0304`, upper case), is its IPv4 address; any other
 * IPv6 address is written in its shortest lower-case form (RFC 5952, as the URL parser writes it), a zone
 * (`%eth0`) kept. A dual-stack socket and a PROXY v2 header from a dual-stack balancer give IPv4 clients in
 * mapped form: without this, per-address caps, allowlists and logs would see one client as two, or every IPv4
 * client as one IPv6 /64. Anything that is not an IP address is returned as it is.
 */
export function canonicalAddress(address: string): string;
export function canonicalAddress(address: string | undefined): string | undefined;
export function canonicalAddress(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6) return address;
  const zoneAt = address.indexOf("%");
  const zone = zoneAt >= 0 ? address.slice(zoneAt) : "";
  const bare = zoneAt >= 0 ? address.slice(0, zoneAt) : address;
  let shortest: string;
  try {
    shortest = new URL(`http://[${bare}]`).hostname.slice(1, -1);
  } catch {
    return address.toLowerCase();
  }
  if (zone === "" && shortest.startsWith(MAPPED_PREFIX)) {
    const groups = shortest.slice(MAPPED_PREFIX.length).split(":");
    if (groups.length === 2) {
      const [high, low] = groups.map((group) => Number.parseInt(group, 16)) as [number, number];
      return [high >> 8, high & 0xff, low >> 8, low & 0xff].join(".");
    }
  }
  return shortest + zone;
}
