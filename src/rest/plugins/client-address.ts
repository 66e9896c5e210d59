import type { FastifyInstance } from "fastify";
import { canonicalAddress } from "../../net/canonical-address.js";

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The client's address (`request.ip`, through PGTOLL_TRUST_PROXY) in its canonical spelling: an IPv4-mapped
     * address is the IPv4 one. Every per-address rule, log line and cap of the HTTP side reads this.
     */
    readonly clientAddress: string;
  }
}

/** Gives every request its `clientAddress`. */
export function decorateClientAddress(app: FastifyInstance): void {
  app.decorateRequest("clientAddress", {
    getter() {
      return canonicalAddress(this.ip);
    },
  });
}
