/**
 * The EIP-712 type of an EIP-3009 `TransferWithAuthorization`, with FiatToken v2.2's field names and order (Base's
 * USDC): what x402's `exact` EVM clients sign and the dev token checks.
 */
export const TRANSFER_WITH_AUTHORIZATION_FIELDS = [
  { name: "from", type: "address" },
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "validAfter", type: "uint256" },
  { name: "validBefore", type: "uint256" },
  { name: "nonce", type: "bytes32" },
] as const;
