import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from "@x402/core/http";
import type { SettleResponse } from "@x402/core/types";
import type { FastifyRequest } from "fastify";
import { PaymentRefusal } from "../x402/accept-payment.js";
import { type BazaarListing, bazaarExtension, resourceServiceMetadata } from "../x402/bazaar.js";
import { paymentRequired, paymentRequirements, type X402Terms } from "../x402/payment-terms.js";
import { HttpError } from "./plugins/errors.js";

/** The request header an x402 client pays with, or undefined. */
export function paymentSignature(request: FastifyRequest): string | undefined {
  const header = request.headers["payment-signature"];
  return typeof header === "string" && header !== "" ? header : undefined;
}

/** What a 402 offers: pay `amountMicro` to `payTo` for this request. */
export interface PaymentOffer {
  terms: X402Terms;
  payTo: string;
  amountMicro: bigint;
  request: FastifyRequest;
  description: string;
  /** The provider's listing when it is listed: the 402 then declares the endpoint for discovery (bazaar). */
  listing?: BazaarListing;
}

/**
 * A 402 an x402 client can pay: `message` as the body's `error` (what the gateway spec's clients read), the
 * PaymentRequired object in the PAYMENT-REQUIRED header and, as the transport allows, in the body too.
 */
export function paymentRequiredError(
  offer: PaymentOffer,
  message: string,
  settlement?: SettleResponse,
): HttpError {
  const listing = offer.listing;
  const required = paymentRequired(
    message,
    {
      url: resourceUrl(offer.request),
      description: listing?.description || offer.description,
      ...(listing ? resourceServiceMetadata(listing) : {}),
    },
    paymentRequirements(offer.terms, offer.payTo, offer.amountMicro),
    listing ? { bazaar: bazaarExtension(listing) } : undefined,
  );
  const headers = {
    "PAYMENT-REQUIRED": encodePaymentRequiredHeader(required),
    ...(settlement ? paymentResponseHeaders(settlement) : {}),
  };
  const { x402Version, resource, accepts, extensions } = required;
  return new HttpError(402, message, undefined, {
    headers,
    body: { x402Version, resource, accepts, ...(extensions ? { extensions } : {}) },
  });
}

/** The answer to a refused payment: a 402 that offers the payment again, or the refusal's own status. */
function refusalError(offer: PaymentOffer, refusal: PaymentRefusal): HttpError {
  if (refusal.status === 402) return paymentRequiredError(offer, refusal.message, refusal.settlement);
  return new HttpError(refusal.status, refusal.message);
}

/** Runs `accept`; a {@link PaymentRefusal} becomes its HTTP answer. */
export async function orRefusal<T>(offer: PaymentOffer, accept: () => Promise<T>): Promise<T> {
  try {
    return await accept();
  } catch (error) {
    throw error instanceof PaymentRefusal ? refusalError(offer, error) : error;
  }
}

/** The PAYMENT-RESPONSE header of a settled payment. */
export function paymentResponseHeaders(settlement: SettleResponse): Record<string, string> {
  return { "PAYMENT-RESPONSE": encodePaymentResponseHeader(settlement) };
}

/**
 * An error answered after the payment was settled and credited: the client still learns the settlement
 * (PAYMENT-RESPONSE), and the message says the money is kept as balance.
 */
export function afterPayment(error: unknown, settlement: SettleResponse, creditedNote: string): unknown {
  if (!(error instanceof HttpError)) return error;
  return new HttpError(error.statusCode, `${error.message} (${creditedNote})`, error.sqlState, {
    ...error.extras,
    headers: { ...error.extras?.headers, ...paymentResponseHeaders(settlement) },
  });
}

function resourceUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}${request.url}`;
}
