import { isIP } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";

/**
 * Whether a peer address is this machine's loopback (127.0.0.0/8, ::1, or 127.x mapped into IPv6): the only
 * place from which the proxy asks for an agent token without TLS, since nothing on the wire can read it there.
 * Anything else, including unparsable or missing addresses, is remote.
 */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const plain = canonicalAddress(address);
  if (plain === "::1") return true;
  return isIP(plain) === 4 && plain.startsWith("127.");
}
