import type { FastifyInstance } from "fastify";
import { formatMicro, numberToMicro, parseMicro } from "../../billing/money.js";
import { findProvider } from "../../providers/registry.js";
import { acceptPayment } from "../../x402/accept-payment.js";
import { agentAuthentication } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { DepositResult, ErrorBody, PaymentRequiredBody, TopUpBody } from "../schemas.js";
import { uuidParam, walletParam } from "../validate.js";
import {
  orRefusal,
  paymentRequiredError,
  paymentResponseHeaders,
  paymentSignature,
} from "../x402-answers.js";

/**
 * POST /api/topup: credits an agent's balance with a provider through an x402 payment of the stated amount, so that
 * agents of the wire proxy and MCP fund themselves as REST agents do, with no deposit step. Without
 * PAYMENT-SIGNATURE it answers 402 with the payment to make; with it, the payment is verified, settled, checked on
 * chain and credited once. Served only when x402 is on.
 */
export async function topUpRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx);
  app.post<{ Body: TopUpBody }>(
    "/api/topup",
    {
      config: { rateLimit: gatewayLimits.deposit },
      schema: {
        summary: "Top up a balance with an x402 payment (PAYMENT-SIGNATURE)",
        tags: ["agents"],
        body: TopUpBody,
        response: {
          200: DepositResult,
          400: ErrorBody,
          401: ErrorBody,
          402: PaymentRequiredBody,
          404: ErrorBody,
          409: ErrorBody,
          500: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const x402 = ctx.x402;
      if (!x402)
        throw new HttpError(
          404,
          "x402 payments are off on this gateway (no PGTOLL_X402_SETTLER_KEY or PGTOLL_X402_FACILITATOR_URL); deposit with POST /api/deposit",
        );
      const agentWallet = walletParam(request.body.agentWallet, "agentWallet");
      const providerId = uuidParam(request.body.providerId, "providerId");
      const amountMicro = topUpAmount(
        request.body.amount,
        x402.terms.minTopupMicro,
        x402.terms.maxTopupMicro,
      );
      const payment = paymentSignature(request);
      if (!payment) await authenticate(request, agentWallet, providerId);
      const provider = await findProvider(ctx.db, providerId);
      if (!provider) throw new HttpError(404, `provider ${providerId} not found`);
      const offer = {
        terms: x402.terms,
        payTo: provider.walletAddress,
        amountMicro,
        request,
        description: `a top-up of ${formatMicro(amountMicro)} USDC for SQL on the database of provider ${providerId}`,
      };
      if (!payment)
        throw paymentRequiredError(
          offer,
          "payment required: sign the payment in PAYMENT-REQUIRED and send it as PAYMENT-SIGNATURE",
        );
      const paid = await orRefusal(offer, () =>
        acceptPayment(x402, {
          header: payment,
          agentWallet,
          providerId,
          payTo: provider.walletAddress,
          minimumMicro: amountMicro,
          exactMicro: amountMicro,
        }),
      );
      ctx.metrics.depositsCredited.inc();
      ctx.metrics.depositedMicro.inc(Number(paid.amountMicro));
      request.log.info(
        { providerId, txHash: paid.settlement.transaction, amountMicro: paid.amountMicro.toString() },
        "x402 top-up credited",
      );
      reply.headers(paymentResponseHeaders(paid.settlement));
      return {
        success: true as const,
        balance: formatMicro(paid.entry.balanceAfterMicro),
        transaction: {
          txHash: paid.settlement.transaction,
          amount: formatMicro(paid.amountMicro),
          verified: true,
        },
      };
    },
  );
}

/** The amount asked for, within the gateway's bounds for one payment; 400 otherwise. */
function topUpAmount(raw: string | number, minMicro: bigint, maxMicro: bigint): bigint {
  const micro = typeof raw === "number" ? numberToMicro(raw) : parseMicro(raw);
  if (micro === null || micro <= 0n)
    throw new HttpError(
      400,
      `invalid amount: ${JSON.stringify(raw)} is not an amount of USDC like "5" or "0.25"`,
    );
  if (micro < minMicro || micro > maxMicro)
    throw new HttpError(
      400,
      `invalid amount: a top-up is between ${formatMicro(minMicro)} and ${formatMicro(maxMicro)} USDC, got ${formatMicro(micro)}`,
    );
  return micro;
}
