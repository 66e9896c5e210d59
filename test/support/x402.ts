import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { type Address, getAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { TRANSFER_WITH_AUTHORIZATION_FIELDS } from "../../src/devchain/index.js";
import { createFacilitator } from "../../src/x402/facilitators.js";

/** What a hand-made authorization may change from a correct one (to provoke each refusal). */
export interface AuthorizationOverrides {
  signerKey?: Hex;
  from?: Address;
  to?: Address;
  value?: bigint;
  validAfter?: bigint;
  validBefore?: bigint;
  nonce?: Hex;
  accepted?: Partial<PaymentRequirements>;
}

/**
 * A PAYMENT-SIGNATURE header for `requirements`, signed by `key` as the x402 `exact` EVM client signs
 * (EIP-3009 TransferWithAuthorization over the token's EIP-712 domain), with `overrides` applied.
 */
export async function signedPayment(
  key: Hex,
  requirements: PaymentRequirements,
  overrides: AuthorizationOverrides = {},
): Promise<string> {
  const account = privateKeyToAccount(key);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization = {
    from: overrides.from ?? account.address,
    to: overrides.to ?? getAddress(requirements.payTo),
    value: overrides.value ?? BigInt(requirements.amount),
    validAfter: overrides.validAfter ?? now - 600n,
    validBefore: overrides.validBefore ?? now + 120n,
    nonce: overrides.nonce ?? (`0x${randomBytes(32).toString("hex")}` as Hex),
  };
  const signer = privateKeyToAccount(overrides.signerKey ?? key);
  const signature = await signer.signTypedData({
    domain: {
      name: String(requirements.extra.name),
      version: String(requirements.extra.version),
      chainId: Number(requirements.network.split(":")[1]),
      verifyingContract: getAddress(requirements.asset),
    },
    types: {
      TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION_FIELDS,
    },
    primaryType: "TransferWithAuthorization",
    message: authorization,
  });
  return encodePaymentSignatureHeader({
    x402Version: 2,
    accepted: { ...requirements, amount: authorization.value.toString(), ...overrides.accepted },
    payload: {
      signature,
      authorization: {
        ...authorization,
        value: authorization.value.toString(),
        validAfter: authorization.validAfter.toString(),
        validBefore: authorization.validBefore.toString(),
      },
    },
  });
}

/**
 * A facilitator's HTTP API (POST /verify, POST /settle, GET /supported, as x402 facilitators serve it) over
 * x402's own facilitator with a settler key: what PGTOLL_X402_FACILITATOR_URL points at.
 */
export async function startHttpFacilitator(options: {
  chainId: number;
  rpcUrl: string;
  settlerKey: Hex;
}): Promise<{ url: string; calls: string[]; close(): Promise<void> }> {
  const facilitator = createFacilitator(options);
  if (!facilitator) throw new Error("no facilitator");
  const calls: string[] = [];
  const server: Server = createServer(async (request, response) => {
    calls.push(`${request.method} ${request.url}`);
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(body));
    };
    try {
      if (request.method === "GET" && request.url === "/supported")
        return send(200, await facilitator.getSupported());
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      if (request.url === "/verify")
        return send(200, await facilitator.verify(body.paymentPayload, body.paymentRequirements));
      if (request.url === "/settle")
        return send(200, await facilitator.settle(body.paymentPayload, body.paymentRequirements));
      send(404, { error: "not found" });
    } catch (error) {
      send(500, { error: (error as Error).message });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
