import { BlockList, isIP } from "node:net";

/**
 * The ranges `public` leaves out: loopback, private, shared, link-local, documentation, multicast, reserved.
 * IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry (addressFamily below); BlockList
 * matches IPv4 addresses against IPv6 rules through that mapping, so `::ffff:0:0/96` must not be listed.
 */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, "ipv4");
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["100::", 64],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  NON_PUBLIC.addSubnet(network, prefix, "ipv6");

/** An IPv4-mapped IPv6 address is checked as its IPv4 address, so `::ffff:127.0.0.1` is loopback. */
export function addressFamily(address: string): [string, "ipv4" | "ipv6"] {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return [mapped[1]!, "ipv4"];
  return [address, isIP(address) === 4 ? "ipv4" : "ipv6"];
}

/** Whether `address` (IPv4 or IPv6) is outside every range of {@link NON_PUBLIC}. */
export function isPublicAddress(address: string): boolean {
  const [plain, family] = addressFamily(address);
  return !NON_PUBLIC.check(plain, family);
}
