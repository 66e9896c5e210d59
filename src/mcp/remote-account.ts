import { getBalance, type Queryable } from "../billing/ledger.js";
import type { ProviderCache } from "../providers/provider-cache.js";

import { agentFunding, type FundingTier } from "../proxy/session-funding.js";
import type { AgentAccount } from "./funds-required.js";
import type { ProxySession } from "./proxy-session.js";

/**
 * The remote MCP endpoint reads what the free tools answer from pgtoll's own database, so that they open no
 * session on the provider's database. Null when the provider does not exist or has not set its pricing.
 */
async function providerTerms(providers: ProviderCache, providerId: string) {
  const found = await providers.find(providerId);
  if (!found?.pricing) return null;
  return { pricing: found.pricing, depositAddress: found.provider.walletAddress };
}

/**
 * Balance, price and deposit address: the balance from the open proxy session while there is one (its charges
 * written first, as `SHOW pgtoll.balance` does), from the ledger otherwise (nothing of a closed session is left
 * unwritten but its last window, written as it closes).
 */
export function remoteAccount(
  db: Queryable,
  providers: ProviderCache,
  wallet: string,
  providerId: string,
  session: ProxySession,
): () => Promise<AgentAccount> {
  return async () => {
    const terms = await providerTerms(providers, providerId);
    if (!terms) throw new Error(`provider ${providerId} does not exist or has not set its pricing yet`);
    const balanceMicro = session.connected
      ? await session.balanceMicro()
      : (await getBalance(db, wallet, providerId)).balanceMicro;
    const price = terms.pricing.price;
    return { balanceMicro, price, depositAddress: terms.depositAddress };
  };
}

/** The agent's funding tier with the provider (session-funding.ts); null when the provider cannot be queried. */
export async function fundingTierOf(
  db: Queryable,
  providers: ProviderCache,
  wallet: string,
  providerId: string,
): Promise<FundingTier | null> {
  const terms = await providerTerms(providers, providerId);
  if (!terms) return null;
  return (await agentFunding(db, wallet, providerId, terms.pricing.price)).tier;
}
