import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { addressFamily, isPublicAddress } from "./public-addresses.js";

/**
 * Where provider databases may be (PGTOLL_PROVIDER_HOSTS): a host name listed by the operator, an address in a
 * listed network, or (with `public`) any address outside the loopback, private, link-local and reserved ranges.
 */
export interface ProviderHostPolicy {
  /** `any`: every address (no check). */
  readonly anyAddress: boolean;
  /** `public`: every public address (public-addresses.ts). */
  readonly publicAddresses: boolean;
  /** Listed networks (CIDRs or single addresses). */
  readonly networks: BlockList;
  /** Listed host names (lower case): whatever they resolve to is allowed. */
  readonly hosts: ReadonlySet<string>;
  /** How a host name becomes addresses (the system resolver; tests give their own). */
  readonly resolve: (host: string) => Promise<{ address: string; family: number }[]>;
}

const resolveWithSystem = async (host: string) => lookup(host, { all: true, verbatim: true });

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*\.?$/;

/**
 * Reads a PGTOLL_PROVIDER_HOSTS value: entries separated by commas, each `any`, `public`, a network
 * (`10.0.0.0/8`, `fd00::/8`), an address (`192.168.1.20`, `::1`) or a host name (`db.internal`). Throws an
 * Error naming the entry it cannot read.
 */
export function parseProviderHosts(raw: string): ProviderHostPolicy {
  const networks = new BlockList();
  const hosts = new Set<string>();
  let anyAddress = false;
  let publicAddresses = false;
  const entries = raw.split(",").map((entry) => entry.trim().toLowerCase());
  if (entries.every((entry) => !entry)) throw new Error("lists no host or network");
  for (const entry of entries.filter(Boolean)) {
    if (entry === "any") anyAddress = true;
    else if (entry === "public") publicAddresses = true;
    else if (entry.includes("/")) {
      const [address = "", bits = ""] = entry.split("/");
      const family = isIP(address);
      const prefix = Number(bits);
      if (!family || !/^\d{1,3}$/.test(bits) || prefix > (family === 4 ? 32 : 128))
        throw new Error(`"${entry}" is not a network (like 10.0.0.0/8 or fd00::/8)`);
      networks.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
    } else if (isIP(entry)) networks.addAddress(entry, isIP(entry) === 4 ? "ipv4" : "ipv6");
    else if (HOST_NAME.test(entry)) hosts.add(entry.replace(/\.$/, ""));
    else throw new Error(`"${entry}" is not "any", "public", a network, an address or a host name`);
  }
  return { anyAddress, publicAddresses, networks, hosts, resolve: resolveWithSystem };
}

/** Only public addresses: what `pgtoll start` allows unless PGTOLL_PROVIDER_HOSTS says otherwise. */
export const PUBLIC_PROVIDER_HOSTS: ProviderHostPolicy = parseProviderHosts("public");
/** Every address: what `pgtoll dev` allows unless PGTOLL_PROVIDER_HOSTS says otherwise. */
export const ANY_PROVIDER_HOSTS: ProviderHostPolicy = parseProviderHosts("any");

/** The policy in force: the configured one, else {@link PUBLIC_PROVIDER_HOSTS}. */
export function providerHostsIn(config: {
  providerHosts: ProviderHostPolicy | undefined;
}): ProviderHostPolicy {
  return config.providerHosts ?? PUBLIC_PROVIDER_HOSTS;
}

export function isAllowedAddress(policy: ProviderHostPolicy, address: string): boolean {
  if (policy.anyAddress) return true;
  const [plain, family] = addressFamily(address);
  if (policy.networks.check(plain, family)) return true;
  return policy.publicAddresses && isPublicAddress(address);
}

/** A provider's host refused by the policy; the message says which address and why. */
export class ProviderHostRefused extends Error {
  override name = "ProviderHostRefused";
}

/**
 * Resolves `host` once and checks every address it has: the caller connects to the address returned, so a
 * name that resolves differently a moment later (DNS rebinding) cannot lead the connection elsewhere. Throws
 * {@link ProviderHostRefused} when one of the addresses is not allowed; lets the resolver's error through.
 */
export async function allowedAddress(
  policy: ProviderHostPolicy,
  host: string,
): Promise<{ address: string; family: 4 | 6 }> {
  const name = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const addresses = isIP(name) ? [{ address: name, family: isIP(name) }] : await policy.resolve(name);
  if (!addresses.length) throw new Error(`${name} has no address`);
  if (!policy.hosts.has(name.replace(/\.$/, ""))) {
    for (const { address } of addresses) {
      if (!isAllowedAddress(policy, address))
        throw new ProviderHostRefused(
          `${address === name ? "" : `the host ${name} resolves to `}${address}, not an address a provider database may have: loopback, private, link-local and reserved addresses are refused unless PGTOLL_PROVIDER_HOSTS lists them`,
        );
    }
  }
  const first = addresses[0]!;
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}
