import { checksumAddress } from "../billing/address.js";
import type { DailyLimit } from "../billing/daily-limits.js";
import type { LedgerEntry } from "../billing/ledger.js";
import { formatMicro, microToNumber } from "../billing/money.js";
import type { PricingRecord, Provider } from "../providers/registry.js";

/** Converts stored records into the spec's JSON shapes: addresses checksummed, money as 6-decimal strings. */
export function presentProvider(provider: Provider) {
  return {
    id: provider.id,
    name: provider.name,
    email: provider.email,
    walletAddress: checksumAddress(provider.walletAddress),
    provisionedByGateway: provider.provisionedByGateway,
    createdAt: provider.createdAt.toISOString(),
  };
}

export function presentPricing(pricing: PricingRecord) {
  return {
    id: pricing.id,
    providerId: pricing.providerId,
    basePricePer1000Rows: microToNumber(pricing.priceMicroPer1000Rows),
    markupMultiplier: microToNumber(pricing.markupPpm),
    readOnly: pricing.readOnly,
    allowRowFolding: pricing.allowRowFolding,
    maxRowsWrittenPerStatement: pricing.maxRowsWrittenPerStatement,
    lockTimeoutMs: pricing.lockTimeoutMs,
    idleInTransactionTimeoutMs: pricing.idleInTransactionTimeoutMs,
    minimumCostPerStatement: microToNumber(pricing.minimumMicroPerStatement ?? 0n),
    pricePerMB: microToNumber(pricing.priceMicroPerMB ?? 0n),
    pricePerSecond: microToNumber(pricing.priceMicroPerSecond ?? 0n),
    tablePrices: Object.fromEntries(
      [...(pricing.tablePricesMicroPer1000Rows ?? [])].map(([name, micro]) => [name, microToNumber(micro)]),
    ),
    createdAt: pricing.createdAt.toISOString(),
    updatedAt: pricing.updatedAt.toISOString(),
  };
}

export function presentLedgerEntry(entry: LedgerEntry) {
  return {
    id: entry.id.toString(),
    providerId: entry.providerId,
    type: entry.type,
    amount: formatMicro(entry.amountMicro),
    balanceBefore: formatMicro(entry.balanceBeforeMicro),
    balanceAfter: formatMicro(entry.balanceAfterMicro),
    txHash: entry.txHash,
    metadata: entry.metadata,
    timestamp: entry.createdAt.toISOString(),
  };
}

/** An agent's daily limit with a provider (`/api/agents/:wallet/limits/:providerId`, MCP's balance tool). */
export function presentDailyLimit(limit: DailyLimit) {
  return {
    dailyLimit: limit.dailyLimitMicro === null ? null : formatMicro(limit.dailyLimitMicro),
    spentToday: formatMicro(limit.spentTodayMicro),
    remainingToday: limit.remainingTodayMicro === null ? null : formatMicro(limit.remainingTodayMicro),
    resetsAt: limit.resetsAt.toISOString(),
  };
}
