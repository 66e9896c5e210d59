import { randomBytes } from "node:crypto";
import {
  type Address,
  concat,
  domainSeparator,
  type Hex,
  parseEventLogs,
  parseSignature,
  serializeSignature,
  toHex,
  zeroAddress,
  zeroHash,
} from "viem";
import { signTypedData } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DevAccount,
  deployTestToken,
  type LocalChain,
  localClients,
  mintTokens,
  startLocalChain,
  type TestToken,
  TRANSFER_WITH_AUTHORIZATION_FIELDS,
  tokenBalance,
} from "./index.js";

// The type strings of FiatToken v2.2 (Base's USDC); x402 clients sign exactly these.
const AUTHORIZATION_FIELDS = TRANSFER_WITH_AUTHORIZATION_FIELDS;
const TYPES = {
  TransferWithAuthorization: AUTHORIZATION_FIELDS,
  ReceiveWithAuthorization: AUTHORIZATION_FIELDS,
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

// secp256k1 group order, to forge the high-s twin of a valid signature.
const CURVE_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

describe("TestUSDC EIP-3009 (as Base's USDC)", () => {
  let chain: LocalChain;
  let token: TestToken;
  let payer: DevAccount;
  let payee: DevAccount;
  let relayer: DevAccount;
  let stranger: DevAccount;

  beforeAll(async () => {
    chain = await startLocalChain({ accountCount: 5 });
    const [deployer, ...rest] = chain.accounts;
    [payer, payee, relayer, stranger] = rest as [DevAccount, DevAccount, DevAccount, DevAccount];
    token = await deployTestToken(chain, deployer!.privateKey);
    await mintTokens(chain, deployer!.privateKey, token, payer.address, 10_000_000n);
  });
  afterAll(async () => {
    await chain?.stop();
  });

  const domain = () =>
    ({ name: "USD Coin", version: "2", chainId: 8453, verifyingContract: token.address }) as const;

  async function now(): Promise<bigint> {
    const { publicClient } = localClients(chain, relayer.privateKey);
    return (await publicClient.getBlock()).timestamp;
  }

  /** A one-hour authorization from payer to payee with a fresh random nonce. */
  async function authorization(overrides: Partial<Authorization> = {}): Promise<Authorization> {
    return {
      from: payer.address,
      to: payee.address,
      value: 1_250_000n,
      validAfter: 0n,
      validBefore: (await now()) + 3600n,
      nonce: toHex(randomBytes(32)),
      ...overrides,
    };
  }

  function sign(
    primaryType: "TransferWithAuthorization" | "ReceiveWithAuthorization",
    message: Authorization,
    key: Hex = payer.privateKey,
  ): Promise<Hex> {
    return signTypedData({ privateKey: key, domain: domain(), types: TYPES, primaryType, message });
  }

  function fields(a: Authorization) {
    return [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce] as const;
  }

  /** Splits a signature into the (v, r, s) arguments of the FiatToken overloads. */
  function vrs(signature: Hex) {
    const { v, r, s } = parseSignature(signature);
    return [Number(v), r, s] as const;
  }

  /** Sends `functionName` from `sender` and returns the mined receipt; rejects on a revert. */
  async function send(sender: DevAccount, functionName: string, args: readonly unknown[]) {
    const { publicClient, walletClient } = localClients(chain, sender.privateKey);
    const hash = await walletClient.writeContract({
      address: token.address,
      abi: token.abi,
      functionName,
      args,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 30_000 });
    expect(receipt.status).toBe("success");
    return receipt;
  }

  async function read(functionName: string, args: readonly unknown[] = []) {
    const { publicClient } = localClients(chain, relayer.privateKey);
    return publicClient.readContract({ address: token.address, abi: token.abi, functionName, args });
  }

  const balance = (who: DevAccount) => tokenBalance(chain, token, who.address);

  it("exposes USDC's EIP-712 domain", async () => {
    expect(await read("name")).toBe("USD Coin");
    expect(await read("version")).toBe("2");
    expect(await read("DOMAIN_SEPARATOR")).toBe(domainSeparator({ domain: domain() }));
    expect(await read("TRANSFER_WITH_AUTHORIZATION_TYPEHASH")).toBe(
      "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267",
    );
    expect(await read("RECEIVE_WITH_AUTHORIZATION_TYPEHASH")).toBe(
      "0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8",
    );
    expect(await read("CANCEL_AUTHORIZATION_TYPEHASH")).toBe(
      "0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429",
    );
  });

  it("moves tokens on a relayed transferWithAuthorization, once", async () => {
    const auth = await authorization();
    const signature = await sign("TransferWithAuthorization", auth);
    const [payerBefore, payeeBefore] = [await balance(payer), await balance(payee)];
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(false);

    const receipt = await send(relayer, "transferWithAuthorization", [...fields(auth), ...vrs(signature)]);

    expect(await balance(payer)).toBe(payerBefore - 1_250_000n);
    expect(await balance(payee)).toBe(payeeBefore + 1_250_000n);
    expect(await balance(relayer)).toBe(0n);
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(true);
    const events = parseEventLogs({ abi: token.abi, logs: receipt.logs }).map((l) => [l.eventName, l.args]);
    expect(events).toEqual([
      ["AuthorizationUsed", { authorizer: payer.address, nonce: auth.nonce }],
      ["Transfer", { from: payer.address, to: payee.address, value: 1_250_000n }],
    ]);

    await expect(
      send(relayer, "transferWithAuthorization", [...fields(auth), ...vrs(signature)]),
    ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
    await expect(send(relayer, "transferWithAuthorization", [...fields(auth), signature])).rejects.toThrow(
      "FiatTokenV2: authorization is used or canceled",
    );
    expect(await balance(payer)).toBe(payerBefore - 1_250_000n);
  });

  it("accepts the signature as 65 bytes too", async () => {
    const auth = await authorization({ value: 300_000n });
    const signature = await sign("TransferWithAuthorization", auth);
    const payeeBefore = await balance(payee);

    await send(relayer, "transferWithAuthorization", [...fields(auth), signature]);

    expect(await balance(payee)).toBe(payeeBefore + 300_000n);
  });

  it("refuses authorizations outside their validity window", async () => {
    const t = await now();
    const expired = await authorization({ validBefore: t - 1n });
    await expect(
      send(relayer, "transferWithAuthorization", [
        ...fields(expired),
        await sign("TransferWithAuthorization", expired),
      ]),
    ).rejects.toThrow("FiatTokenV2: authorization is expired");

    const early = await authorization({ validAfter: t + 3600n, validBefore: t + 7200n });
    await expect(
      send(relayer, "transferWithAuthorization", [
        ...fields(early),
        await sign("TransferWithAuthorization", early),
      ]),
    ).rejects.toThrow("FiatTokenV2: authorization is not yet valid");
  });

  it("refuses signatures that are not the payer's", async () => {
    const auth = await authorization();
    const payerBefore = await balance(payer);
    const invalid = "FiatTokenV2: invalid signature";

    const byStranger = await sign("TransferWithAuthorization", auth, stranger.privateKey);
    await expect(send(relayer, "transferWithAuthorization", [...fields(auth), byStranger])).rejects.toThrow(
      invalid,
    );

    // A receive authorization must not be spendable as a transfer (distinct type hashes).
    const receiveSig = await sign("ReceiveWithAuthorization", auth);
    await expect(send(relayer, "transferWithAuthorization", [...fields(auth), receiveSig])).rejects.toThrow(
      invalid,
    );

    // The high-s twin recovers the payer, but FiatToken rejects malleable signatures.
    const good = parseSignature(await sign("TransferWithAuthorization", auth));
    const twin = {
      r: good.r,
      s: toHex(CURVE_ORDER - BigInt(good.s), { size: 32 }),
      yParity: 1 - good.yParity!,
    };
    await expect(
      send(relayer, "transferWithAuthorization", [...fields(auth), serializeSignature(twin)]),
    ).rejects.toThrow(invalid);
    // A valid signature with a trailing byte is not 65 bytes long: FiatToken refuses it.
    const padded = concat([await sign("TransferWithAuthorization", auth), "0x00"]);
    await expect(send(relayer, "transferWithAuthorization", [...fields(auth), padded])).rejects.toThrow(
      invalid,
    );
    // ecrecover yields the zero address for r = 0; that must not pass as a signature "by" it.
    const fromZero = await authorization({ from: zeroAddress, value: 0n });
    const unrecoverable = [27, zeroHash, toHex(1n, { size: 32 })] as const;
    await expect(
      send(relayer, "transferWithAuthorization", [...fields(fromZero), ...unrecoverable]),
    ).rejects.toThrow(invalid);

    expect(await balance(payer)).toBe(payerBefore);
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(false);
  });

  it("refuses a value above the payer's balance", async () => {
    const payerBefore = await balance(payer);
    const auth = await authorization({ value: payerBefore + 1n });
    await expect(
      send(relayer, "transferWithAuthorization", [
        ...fields(auth),
        await sign("TransferWithAuthorization", auth),
      ]),
    ).rejects.toThrow("TestUSDC: insufficient balance");
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(false);
  });

  it("lets only the payee submit receiveWithAuthorization", async () => {
    const auth = await authorization({ value: 40_000n });
    const signature = await sign("ReceiveWithAuthorization", auth);
    const payeeBefore = await balance(payee);

    await expect(
      send(relayer, "receiveWithAuthorization", [...fields(auth), ...vrs(signature)]),
    ).rejects.toThrow("FiatTokenV2: caller must be the payee");
    await expect(send(relayer, "receiveWithAuthorization", [...fields(auth), signature])).rejects.toThrow(
      "FiatTokenV2: caller must be the payee",
    );
    expect(await balance(payee)).toBe(payeeBefore);

    await send(payee, "receiveWithAuthorization", [...fields(auth), ...vrs(signature)]);
    expect(await balance(payee)).toBe(payeeBefore + 40_000n);
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(true);
  });

  it("cancelAuthorization burns the nonce", async () => {
    const auth = await authorization();
    const cancel = await signTypedData({
      privateKey: payer.privateKey,
      domain: domain(),
      types: TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: payer.address, nonce: auth.nonce },
    });
    const payerBefore = await balance(payer);

    const byStranger = await signTypedData({
      privateKey: stranger.privateKey,
      domain: domain(),
      types: TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: payer.address, nonce: auth.nonce },
    });
    await expect(
      send(relayer, "cancelAuthorization", [payer.address, auth.nonce, byStranger]),
    ).rejects.toThrow("FiatTokenV2: invalid signature");

    const receipt = await send(relayer, "cancelAuthorization", [payer.address, auth.nonce, ...vrs(cancel)]);
    const events = parseEventLogs({ abi: token.abi, logs: receipt.logs }).map((l) => [l.eventName, l.args]);
    expect(events).toEqual([["AuthorizationCanceled", { authorizer: payer.address, nonce: auth.nonce }]]);
    expect(await read("authorizationState", [payer.address, auth.nonce])).toBe(true);

    await expect(
      send(relayer, "transferWithAuthorization", [
        ...fields(auth),
        await sign("TransferWithAuthorization", auth),
      ]),
    ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
    await expect(send(relayer, "cancelAuthorization", [payer.address, auth.nonce, cancel])).rejects.toThrow(
      "FiatTokenV2: authorization is used or canceled",
    );
    expect(await balance(payer)).toBe(payerBefore);
  });
});
