import type { FastifyInstance } from "fastify";
import { ChainUnavailableError } from "../../billing/chain-verify.js";
import { creditDeposit } from "../../billing/ledger.js";
import { formatMicro } from "../../billing/money.js";
import { findProvider } from "../../providers/registry.js";
import { agentAuthentication } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { DepositBody, DepositResult, ErrorBody } from "../schemas.js";
import { txHashParam, uuidParam, walletParam } from "../validate.js";

/**
 * POST /api/deposit: credits a token transfer from the agent's wallet to the provider's wallet, verified on
 * chain, at most once per (chain id, transaction hash).
 */
export async function depositRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx);
  app.post<{ Body: DepositBody }>(
    "/api/deposit",
    {
      config: { rateLimit: gatewayLimits.deposit },
      schema: {
        summary: "Credit an on-chain deposit",
        tags: ["agents"],
        body: DepositBody,
        response: {
          200: DepositResult,
          400: ErrorBody,
          402: ErrorBody,
          404: ErrorBody,
          409: ErrorBody,
          500: ErrorBody,
        },
      },
    },
    async (request) => {
      const txHash = txHashParam(request.body.txHash);
      const agentWallet = walletParam(request.body.agentWallet, "agentWallet");
      const providerId = uuidParam(request.body.providerId, "providerId");
      await authenticate(request, agentWallet, providerId);
      const provider = await findProvider(ctx.db, providerId);
      if (!provider) throw new HttpError(404, `provider ${providerId} not found`);
      const seen = await ctx.db.query("SELECT 1 FROM deposits WHERE chain_id = $1 AND tx_hash = $2", [
        ctx.config.chainId,
        txHash,
      ]);
      if (seen.rowCount) throw new HttpError(409, `transaction ${txHash} was already processed`);

      let verification: Awaited<ReturnType<GatewayContext["verifier"]["verifyDeposit"]>>;
      try {
        verification = await ctx.verifier.verifyDeposit(txHash, agentWallet, provider.walletAddress);
      } catch (error: unknown) {
        if (error instanceof ChainUnavailableError) {
          throw new HttpError(
            500,
            `blockchain verification failed: ${error.message}; nothing was credited, retry later`,
          );
        }
        throw error;
      }
      if (!verification.ok)
        throw new HttpError(402, `deposit not accepted (${verification.reason}): ${verification.message}`);

      const entry = await creditDeposit(ctx.db, {
        chainId: ctx.config.chainId,
        txHash,
        agentWallet,
        providerId,
        amountMicro: verification.amountMicro,
        blockNumber: verification.blockNumber,
      });
      if (!entry) throw new HttpError(409, `transaction ${txHash} was already processed`);
      ctx.metrics.depositsCredited.inc();
      ctx.metrics.depositedMicro.inc(Number(verification.amountMicro));
      request.log.info(
        { providerId, txHash, amountMicro: verification.amountMicro.toString() },
        "deposit credited",
      );
      return {
        success: true as const,
        balance: formatMicro(entry.balanceAfterMicro),
        transaction: { txHash, amount: formatMicro(verification.amountMicro), verified: true },
      };
    },
  );
}
