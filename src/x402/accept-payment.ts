import { decodePaymentSignatureHeader } from "@x402/core/http";
import type { FacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements, SettleResponse } from "@x402/core/types";
import {
  ChainUnavailableError,
  type DepositVerification,
  type DepositVerifier,
} from "../billing/chain-verify.js";
import { creditDeposit, type LedgerEntry, type Queryable } from "../billing/ledger.js";
import { formatMicro } from "../billing/money.js";
import {
  type AuthorizationKey,
  claimAuthorization,
  isClaimed,
  recordSettlement,
  releaseClaim,
} from "./payment-claims.js";
import {
  AUTHORIZATION_CLOCK_SKEW_SECONDS,
  MAX_TIMEOUT_SECONDS,
  networkOf,
  paymentRequirements,
  X402_VERSION,
  type X402Terms,
} from "./payment-terms.js";

/** What accepting an x402 payment needs; built once by the server. */
export interface X402Gateway {
  terms: X402Terms;
  facilitator: FacilitatorClient;
  db: Queryable;
  /** Checks the settlement transaction on chain before anything is credited, whoever settled it. */
  verifier: DepositVerifier;
}

/** A payment pgtoll did not accept; nothing was credited. `reason` is x402's error code. */
export class PaymentRefusal extends Error {
  override readonly name = "PaymentRefusal";
  constructor(
    /** 400 malformed, 402 refused or failed, 409 credited already, 500 the facilitator or chain failed. */
    readonly status: 400 | 402 | 409 | 500,
    readonly reason: string,
    message: string,
    /** The facilitator's answer when the settlement itself failed (sent back as PAYMENT-RESPONSE). */
    readonly settlement?: SettleResponse,
  ) {
    super(message);
  }
}

export interface PaymentRequest {
  /** The PAYMENT-SIGNATURE header as received. */
  header: string;
  agentWallet: string;
  providerId: string;
  /** The provider's wallet: the only accepted recipient. */
  payTo: string;
  /** Least the payment must carry. */
  minimumMicro: bigint;
  /** When set, the payment must carry exactly this (a top-up of a stated amount). */
  exactMicro?: bigint;
}

export interface AcceptedPayment {
  entry: LedgerEntry;
  settlement: SettleResponse;
  amountMicro: bigint;
}

interface Authorization {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const NONCE = /^0x[0-9a-fA-F]{64}$/;
const UINT = /^\d{1,78}$/;

/**
 * Accepts an x402 `exact` payment for an agent with a provider: checks it against what pgtoll offers, has the
 * facilitator verify it, claims its authorization (so it is settled once however often it is sent), settles it on
 * chain, checks the settlement transaction on chain itself, and credits it as a deposit (idempotent by chain id and
 * transaction hash). Throws {@link PaymentRefusal} with nothing credited when any step says no.
 */
export async function acceptPayment(gateway: X402Gateway, request: PaymentRequest): Promise<AcceptedPayment> {
  const payload = decode(request.header);
  const authorization = checkOffer(gateway.terms, payload, request);
  const amountMicro = BigInt(authorization.value);
  const requirements = paymentRequirements(gateway.terms, request.payTo, amountMicro);

  const key: AuthorizationKey = {
    chainId: gateway.terms.chainId,
    asset: gateway.terms.tokenAddress,
    payer: authorization.from,
    nonce: authorization.nonce,
  };
  // A replay is answered from the claims, without asking the chain (whose answer would only be a failed simulation).
  if (await isClaimed(gateway.db, key)) throw alreadyUsed();

  const verified = await facilitatorCall("verify", () => gateway.facilitator.verify(payload, requirements));
  if (!verified.isValid) {
    // A facilitator that cannot read the chain calls a good signature invalid: that is a 500, not the payment's fault.
    await facilitatorCall("verify", async () => gateway.verifier.probe?.());
    const reason = verified.invalidReason ?? "invalid_payload";
    throw new PaymentRefusal(
      402,
      reason,
      `payment not accepted (${reason})${detail(verified.invalidMessage)}`,
    );
  }
  if (!(await claimAuthorization(gateway.db, key, request.providerId, amountMicro))) throw alreadyUsed();

  const settlement = await settle(gateway, key, payload, requirements);
  const verification = await confirmOnChain(gateway, settlement.transaction as `0x${string}`, request);
  const entry = await creditDeposit(gateway.db, {
    chainId: gateway.terms.chainId,
    txHash: settlement.transaction.toLowerCase(),
    agentWallet: request.agentWallet,
    providerId: request.providerId,
    amountMicro: verification.amountMicro,
    blockNumber: verification.blockNumber,
    metadata: {
      source: "x402",
      payer: authorization.from.toLowerCase(),
      nonce: authorization.nonce.toLowerCase(),
    },
  });
  if (!entry)
    throw new PaymentRefusal(409, "duplicate", `transaction ${settlement.transaction} was already processed`);
  return { entry, settlement, amountMicro: verification.amountMicro };
}

function alreadyUsed(): PaymentRefusal {
  return new PaymentRefusal(
    402,
    "invalid_exact_evm_nonce_already_used",
    "payment not accepted (invalid_exact_evm_nonce_already_used): this authorization was already used; sign a new one",
  );
}

function decode(header: string): PaymentPayload {
  const malformed = (what: string) =>
    new PaymentRefusal(400, "invalid_payload", `invalid PAYMENT-SIGNATURE header: ${what}`);
  let decoded: unknown;
  try {
    decoded = decodePaymentSignatureHeader(header);
  } catch (error) {
    throw malformed(`not a base64-encoded x402 payment payload (${(error as Error).message})`);
  }
  // The decoder parses JSON without checking its shape: valid JSON of any shape arrives here.
  if (!isObject(decoded))
    throw malformed(`not an x402 payment payload: it is ${kindOf(decoded)}, not an object`);
  for (const field of ["payload", "accepted"] as const) {
    if (!isObject(decoded[field]))
      throw malformed(`"${field}" must be an object, not ${kindOf(decoded[field])}`);
  }
  return decoded as unknown as PaymentPayload;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** How a JSON value is named in a message: "null", "an array", "a string", … */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "missing";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

/** The payload names what pgtoll offers: version, scheme, network, token, recipient, payer and amount. */
function checkOffer(terms: X402Terms, payload: PaymentPayload, request: PaymentRequest): Authorization {
  const refuse = (reason: string, message: string): never => {
    throw new PaymentRefusal(402, reason, `payment not accepted (${reason}): ${message}`);
  };
  if (payload.x402Version !== X402_VERSION)
    refuse("invalid_x402_version", `x402 version ${payload.x402Version} is not supported; use 2`);
  const accepted = payload.accepted ?? ({} as PaymentRequirements);
  if (accepted.scheme !== "exact")
    refuse("invalid_scheme", `scheme ${accepted.scheme} is not offered; use exact`);
  if (accepted.network !== networkOf(terms))
    refuse("invalid_network", `network ${accepted.network} is not offered; use ${networkOf(terms)}`);
  if (typeof accepted.asset !== "string" || accepted.asset.toLowerCase() !== terms.tokenAddress.toLowerCase())
    refuse(
      "invalid_payment_requirements",
      `asset ${accepted.asset} is not the token pgtoll accepts (${terms.tokenAddress})`,
    );
  const authorization = (payload.payload as { authorization?: Partial<Authorization> }).authorization;
  if (!isAuthorization(authorization))
    throw new PaymentRefusal(
      400,
      "invalid_payload",
      "invalid PAYMENT-SIGNATURE header: payload.authorization needs from, to, value, validAfter, validBefore and nonce",
    );
  if (
    accepted.payTo?.toLowerCase() !== request.payTo.toLowerCase() ||
    authorization.to.toLowerCase() !== request.payTo.toLowerCase()
  )
    refuse(
      "invalid_exact_evm_payload_recipient_mismatch",
      `the payment must go to the provider's wallet ${request.payTo}`,
    );
  if (authorization.from.toLowerCase() !== request.agentWallet.toLowerCase())
    refuse(
      "invalid_payload",
      `the payment is from ${authorization.from}, but the request is for agent ${request.agentWallet}`,
    );
  const value = BigInt(authorization.value);
  const mismatch = "invalid_exact_evm_payload_authorization_value_mismatch";
  if (request.exactMicro !== undefined && value !== request.exactMicro)
    refuse(
      mismatch,
      `the payment carries ${formatMicro(value)} USDC, this top-up is for ${formatMicro(request.exactMicro)}`,
    );
  if (value < request.minimumMicro)
    refuse(
      mismatch,
      `the payment carries ${formatMicro(value)} USDC, at least ${formatMicro(request.minimumMicro)} is required`,
    );
  if (value > terms.maxTopupMicro)
    refuse(
      mismatch,
      `the payment carries ${formatMicro(value)} USDC, at most ${formatMicro(terms.maxTopupMicro)} is accepted in one payment`,
    );
  checkWindow(authorization, refuse);
  return authorization;
}

/**
 * The authorization is valid now and for no longer than the offer's `maxTimeoutSeconds`: a signature that stays
 * valid for years could be settled by whoever holds it long after the agent stopped meaning it.
 */
function checkWindow(authorization: Authorization, refuse: (reason: string, message: string) => never): void {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const validAfter = BigInt(authorization.validAfter);
  const validBefore = BigInt(authorization.validBefore);
  const latest = now + BigInt(MAX_TIMEOUT_SECONDS + AUTHORIZATION_CLOCK_SKEW_SECONDS);
  if (validBefore <= now)
    refuse(
      "invalid_exact_evm_payload_authorization_valid_before",
      `the authorization expired at ${validBefore} (validBefore), it is ${now}; sign a new one`,
    );
  if (validBefore > latest)
    refuse(
      "invalid_exact_evm_payload_authorization_valid_before",
      `the authorization is valid until ${validBefore} (validBefore), past what the offer allows: at most ${MAX_TIMEOUT_SECONDS} s (maxTimeoutSeconds) from now, ${now}`,
    );
  if (validAfter > now + BigInt(AUTHORIZATION_CLOCK_SKEW_SECONDS))
    refuse(
      "invalid_exact_evm_payload_authorization_valid_after",
      `the authorization is not valid before ${validAfter} (validAfter), it is ${now}`,
    );
}

function isAuthorization(value: Partial<Authorization> | undefined): value is Authorization {
  return (
    !!value &&
    typeof value.from === "string" &&
    ADDRESS.test(value.from) &&
    typeof value.to === "string" &&
    ADDRESS.test(value.to) &&
    typeof value.nonce === "string" &&
    NONCE.test(value.nonce) &&
    [value.value, value.validAfter, value.validBefore].every((n) => typeof n === "string" && UINT.test(n))
  );
}

/** Settles a claimed authorization; a failure that sent no transaction gives the claim back. */
async function settle(
  gateway: X402Gateway,
  key: AuthorizationKey,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): Promise<SettleResponse> {
  let settlement: SettleResponse;
  try {
    settlement = await facilitatorCall("settle", () => gateway.facilitator.settle(payload, requirements));
  } catch (error) {
    await releaseClaim(gateway.db, key);
    throw error;
  }
  if (settlement.transaction) await recordSettlement(gateway.db, key, settlement.transaction);
  else await releaseClaim(gateway.db, key);
  if (!settlement.success) {
    const reason = settlement.errorReason ?? "unexpected_settle_error";
    const sent = settlement.transaction ? ` (transaction ${settlement.transaction})` : "";
    throw new PaymentRefusal(
      402,
      reason,
      `payment settlement failed (${reason})${sent}${detail(settlement.errorMessage)}; nothing was credited`,
      settlement,
    );
  }
  return settlement;
}

/**
 * The settlement transaction, read back from the chain: mined, successful, and moving the tokens from the agent to
 * the provider. A facilitator's word alone credits nothing. A receipt the RPC does not show yet is waited for a
 * few seconds (a remote facilitator may use another node).
 */
async function confirmOnChain(
  gateway: X402Gateway,
  txHash: `0x${string}`,
  request: PaymentRequest,
): Promise<Extract<DepositVerification, { ok: true }>> {
  const deadline = Date.now() + 5000;
  for (;;) {
    let verification: DepositVerification;
    try {
      verification = await gateway.verifier.verifyDeposit(txHash, request.agentWallet, request.payTo, {
        minConfirmations: 1,
      });
    } catch (error) {
      if (!(error instanceof ChainUnavailableError)) throw error;
      throw new PaymentRefusal(
        500,
        "unexpected_settle_error",
        `payment settled in transaction ${txHash}, but it could not be checked on chain: ${error.message}; credit it later with POST /api/deposit`,
      );
    }
    if (verification.ok) return verification;
    const pending =
      verification.reason === "not_found" || verification.reason === "insufficient_confirmations";
    if (!pending || Date.now() > deadline)
      throw new PaymentRefusal(
        402,
        "invalid_transaction_state",
        `payment settlement not confirmed on chain (${verification.reason}): ${verification.message}; nothing was credited`,
      );
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Runs a facilitator call; one that throws (unreachable, timed out, answered garbage) is a 500, nothing credited. */
async function facilitatorCall<T>(what: "verify" | "settle", call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const answer = error as { invalidReason?: string; errorReason?: string; message?: string };
    const reason = answer.invalidReason ?? answer.errorReason;
    if (reason)
      throw new PaymentRefusal(402, reason, `payment not accepted (${reason})${detail(answer.message)}`);
    throw new PaymentRefusal(
      500,
      what === "verify" ? "unexpected_verify_error" : "unexpected_settle_error",
      `payment ${what === "verify" ? "verification" : "settlement"} failed: the facilitator or chain RPC could not be used (${answer.message ?? String(error)}); nothing was credited, retry later`,
    );
  }
}

function detail(message: string | undefined): string {
  // viem puts the revert reason on a line of its own: keep the first lines, as one.
  return message ? `: ${message.replace(/\s+/g, " ").trim().slice(0, 300)}` : "";
}
