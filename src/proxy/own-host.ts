import { networkInterfaces } from "node:os";
import { canonicalAddress } from "../net/canonical-address.js";
import { isLoopback } from "./loopback.js";

/**
 * Whether a peer address is this host's own (loopback, or an address of one of its interfaces): the remote MCP
 * endpoint reaches its process's proxy from there, for many agents at once. Interfaces are read once.
 */
export function ownHostAddresses(): (address: string) => boolean {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces()))
    for (const entry of list ?? []) own.add(canonicalAddress(entry.address));
  return (address) => isLoopback(address) || own.has(canonicalAddress(address));
}
