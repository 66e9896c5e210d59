import type pg from "pg";
import type { DepositVerifier } from "../billing/chain-verify.js";
import type { Config } from "../config.js";
import type { X402Gateway } from "./accept-payment.js";
import { createFacilitator } from "./facilitators.js";

/** x402 payments, when a settler key or a facilitator URL is configured. */
export function x402Gateway(config: Config, db: pg.Pool, verifier: DepositVerifier): X402Gateway | undefined {
  const facilitator = createFacilitator({
    chainId: config.chainId,
    rpcUrl: config.rpcUrl,
    ...(config.x402SettlerKey ? { settlerKey: config.x402SettlerKey } : {}),
    ...(config.x402FacilitatorUrl ? { facilitatorUrl: config.x402FacilitatorUrl } : {}),
  });
  if (!facilitator) return undefined;
  const terms = {
    chainId: config.chainId,
    tokenAddress: config.tokenAddress,
    tokenName: config.tokenName,
    tokenVersion: config.tokenVersion,
    minTopupMicro: config.x402MinTopupMicro,
    maxTopupMicro: config.x402MaxTopupMicro,
  };
  return { terms, facilitator, db, verifier };
}
