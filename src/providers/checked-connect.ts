import { type LookupFunction, Socket } from "node:net";
import { allowedAddress, type ProviderHostPolicy } from "./provider-hosts.js";

type AllCallback = (error: null, addresses: { address: string; family: number }[]) => void;

/**
 * A `lookup` for `net.connect` that resolves a provider's host name once, checks its addresses against the
 * policy and hands the socket the checked address, so every connection to a provider (not only the one made
 * at registration) goes where the policy allows, whatever the name resolves to by then. Undefined when the
 * policy allows every address. Node does not look up a host that is an address: those are checked once, at
 * registration, since what they point at cannot change.
 */
export function providerLookup(policy: ProviderHostPolicy): LookupFunction | undefined {
  if (policy.anyAddress) return undefined;
  return (hostname, options, callback) => {
    allowedAddress(policy, hostname).then(
      ({ address, family }) =>
        // With autoSelectFamily (Node's default) the socket asks for every address.
        options.all
          ? (callback as AllCallback)(null, [{ address, family }])
          : callback(null, address, family),
      (error: NodeJS.ErrnoException) => callback(error, "", 4),
    );
  };
}

/**
 * A socket factory for node-postgres (`stream`) whose connections go to `to`: one address already checked
 * (registration), or whatever a checking `lookup` answers. node-postgres keeps the host name for TLS (server
 * name and certificate check); it only calls `connect(port, host)`, which is where the target is put.
 */
export function providerSocket(
  to: { address: string } | { lookup: LookupFunction | undefined },
): () => Socket {
  return () => {
    const socket = new Socket();
    const connect = socket.connect.bind(socket) as (options: object) => Socket;
    socket.connect = ((port: number, host: string) =>
      "address" in to
        ? connect({ port, host: to.address })
        : connect({ port, host, ...(to.lookup ? { lookup: to.lookup } : {}) })) as Socket["connect"];
    return socket;
  };
}
