import { erc20Abi, type Log, parseEventLogs } from "viem";

/** One ERC-20 `Transfer(from, to, value)` event, with the contract that emitted it. */
export interface TokenTransfer {
  token: `0x${string}`;
  from: `0x${string}`;
  to: `0x${string}`;
  value: bigint;
}

/** Either the summed deposit, or why nothing in the transaction counts as one. */
export type DepositTransfers =
  | { ok: true; amountMicro: bigint; count: number }
  | { ok: false; message: string };

/**
 * Decodes the ERC-20 Transfer events of a receipt. Logs that only share the event signature
 * (ERC-721 `Transfer` has a third indexed topic and no data) fail strict decoding and are skipped.
 */
export function decodeTransfers(logs: readonly Log[]): TokenTransfer[] {
  return parseEventLogs({ abi: erc20Abi, eventName: "Transfer", logs: [...logs], strict: true }).map(
    (log) => ({
      token: log.address,
      from: log.args.from,
      to: log.args.to,
      value: log.args.value,
    }),
  );
}

/**
 * Sums the transfers of `token` from `agentWallet` to `providerWallet` (addresses compared
 * case-insensitively). When none match, the message says which part did not: token contract,
 * sender or recipient.
 */
export function sumDepositTransfers(
  transfers: readonly TokenTransfer[],
  token: string,
  agentWallet: string,
  providerWallet: string,
): DepositTransfers {
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  const ofToken = transfers.filter((t) => same(t.token, token));
  const fromAgent = ofToken.filter((t) => same(t.from, agentWallet));
  const matching = fromAgent.filter((t) => same(t.to, providerWallet));
  const amountMicro = matching.reduce((sum, t) => sum + t.value, 0n);
  if (matching.length > 0 && amountMicro > 0n) return { ok: true, amountMicro, count: matching.length };

  if (transfers.length === 0)
    return { ok: false, message: "the transaction emitted no token Transfer event" };
  if (ofToken.length === 0) {
    const others = distinct(transfers.map((t) => t.token));
    return {
      ok: false,
      message: `the transaction moved no tokens of the accepted token contract ${token} (Transfer events came from ${others})`,
    };
  }
  if (fromAgent.length === 0) {
    const senders = distinct(ofToken.map((t) => t.from));
    return {
      ok: false,
      message: `no token transfer from the agent wallet ${agentWallet} in this transaction (sent by ${senders})`,
    };
  }
  if (matching.length === 0) {
    const recipients = distinct(fromAgent.map((t) => t.to));
    return {
      ok: false,
      message: `the agent's token transfer went to ${recipients}, not to the provider wallet ${providerWallet}`,
    };
  }
  return { ok: false, message: "the token transfers to the provider wallet move an amount of 0" };
}

function distinct(addresses: readonly string[]): string {
  return [...new Set(addresses.map((a) => a.toLowerCase()))].join(", ");
}
