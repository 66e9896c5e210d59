import {
  type Address,
  encodeAbiParameters,
  encodeEventTopics,
  erc20Abi,
  type Hex,
  type Log,
  pad,
  toHex,
} from "viem";
import { describe, expect, it } from "vitest";
import { decodeTransfers, sumDepositTransfers, type TokenTransfer } from "./deposit-transfers.js";

const TOKEN: Address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const AGENT: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const PROVIDER: Address = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

function log(address: Address, topics: Hex[], data: Hex): Log {
  return {
    address,
    topics: topics as [Hex, ...Hex[]],
    data,
    blockHash: pad("0x01"),
    blockNumber: 1n,
    logIndex: 0,
    transactionHash: pad("0x02"),
    transactionIndex: 0,
    removed: false,
  };
}

function erc20Transfer(from: Address, to: Address, value: bigint): Log {
  const topics = encodeEventTopics({ abi: erc20Abi, eventName: "Transfer", args: { from, to } });
  return log(TOKEN, topics as Hex[], encodeAbiParameters([{ type: "uint256" }], [value]));
}

describe("decodeTransfers", () => {
  it("decodes ERC-20 Transfer logs and skips an ERC-721 Transfer with the same signature", () => {
    const sameSignature = erc20Transfer(AGENT, PROVIDER, 0n);
    const nft = log(TOKEN, [...(sameSignature.topics as Hex[]), pad(toHex(42))], "0x");
    expect(decodeTransfers([erc20Transfer(AGENT, PROVIDER, 5n), nft])).toEqual([
      { token: TOKEN, from: AGENT, to: PROVIDER, value: 5n },
    ]);
  });
});

describe("sumDepositTransfers", () => {
  const t = (over: Partial<TokenTransfer>): TokenTransfer => ({
    token: TOKEN,
    from: AGENT,
    to: PROVIDER,
    value: 1n,
    ...over,
  });

  it("compares addresses without regard to case", () => {
    const result = sumDepositTransfers(
      [t({ value: 2n }), t({ value: 3n })],
      TOKEN.toUpperCase().replace("0X", "0x"),
      AGENT.toLowerCase(),
      PROVIDER.toLowerCase(),
    );
    expect(result).toEqual({ ok: true, amountMicro: 5n, count: 2 });
  });

  it("does not credit transfers of zero", () => {
    const result = sumDepositTransfers([t({ value: 0n })], TOKEN, AGENT, PROVIDER);
    expect(result).toMatchObject({ ok: false });
    expect(!result.ok && result.message).toContain("amount of 0");
  });
});
