import { performance } from "node:perf_hooks";
import { formatMicro } from "../billing/money.js";
import type { Config } from "../config.js";
import { deriveDevAccounts, mintTokens } from "../devchain/index.js";
import type { Logger } from "../log.js";
import { ANY_PROVIDER_HOSTS } from "../providers/provider-hosts.js";
import { createSecretBox, loadSecretKey } from "../providers/secret-box.js";
import { AGENT_TOKEN_LIFETIME_S, createAgentToken } from "../proxy/agent-token.js";
import { startServer } from "../server.js";
import { planDemoChain, startDemoChain } from "./demo-chain.js";
import {
  DEMO_DEPOSIT_MICRO,
  DEMO_PRICE,
  DEV_ACCOUNT,
  SAMPLE_PROVIDER,
  X402_AGENT_FUNDS_MICRO,
} from "./demo-defaults.js";
import { fundDemoAgent } from "./demo-funding.js";
import { devProxyTls } from "./dev-certificate.js";
import { removeDevState, writeDevState } from "./dev-state.js";
import { dialUrl } from "./dial-address.js";
import type { DevStackInfo } from "./instructions.js";
import { prepareSampleDatabase } from "./sample-database.js";
import { ensureSampleProvider } from "./sample-provider.js";

const lower = (address: string) => address.toLowerCase() as `0x${string}`;

/** Thrown by {@link startDevStack} when it was asked to stop before it was up; everything started is stopped. */
export class DevStackInterrupted extends Error {
  override name = "DevStackInterrupted";
}

export interface DevStack {
  /** What the walk-through prints, minus the CLI invocation and data directory flag. */
  info: Omit<DevStackInfo, "cli" | "mcp" | "dataDirFlag">;
  /** Stops pgtoll (proxy, REST API, embedded PostgreSQL) and the chain. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * Starts the whole dev stack in this process: a fresh local chain with the dev USDC, pgtoll itself verifying
 * deposits against that chain and token (1 confirmation), the sample database, the sample provider (registered
 * and priced through pgtoll's REST API), and a real on-chain deposit for the demo agent, credited through
 * `POST /api/deposit`. `stopRequested` is polled between steps; when it turns true the steps already done are
 * undone and {@link DevStackInterrupted} is thrown. A failed step undoes the earlier ones too. `progress` is
 * told each step as it ends, with the seconds since the start (starting takes 10 to 20 s).
 */
export async function startDevStack(
  config: Config,
  logger: Logger,
  stopRequested: () => boolean,
  progress: (line: string) => void = () => {},
): Promise<DevStack> {
  const started = performance.now();
  const done = (step: string) =>
    progress(`  ${step} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  const cleanups: (() => Promise<void>)[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      for (const cleanup of cleanups.reverse()) {
        try {
          await cleanup();
        } catch (error) {
          logger.warn({ err: error }, "error while stopping the dev stack");
        }
      }
    })();
    return stopping;
  };
  const step = () => {
    if (stopRequested()) throw new DevStackInterrupted("stopped while starting");
  };

  try {
    // The chain and pgtoll start side by side: the plan tells pgtoll the chain's URL and token beforehand.
    progress(
      "Starting a local chain with a dev USDC contract, and pgtoll with its embedded PostgreSQL (10 to 20 s):",
    );
    const plan = await planDemoChain(config.chainId);
    const accounts = deriveDevAccounts(DEV_ACCOUNT.x402Agent + 1);
    const x402Agent = accounts[DEV_ACCOUNT.x402Agent]!;
    // pgtoll settles x402 payments itself with a dev account's gas, unless a facilitator was configured.
    const x402 = config.x402FacilitatorUrl
      ? {}
      : { x402SettlerKey: config.x402SettlerKey ?? accounts[DEV_ACCOUNT.x402Settler]!.privateKey };
    // The proxy offers TLS, so that clients reach endpoints by SNI (neonctl connection-string's URIs).
    const { rootCert, ...tls } = await devProxyTls(config, progress);
    const [chainStart, serverStart] = await Promise.allSettled([
      startDemoChain(plan, done),
      startServer(
        {
          ...config,
          ...tls,
          // The dev stack's own sample database is on loopback, and so are the databases one tries it with.
          providerHosts: config.providerHosts ?? ANY_PROVIDER_HOSTS,
          rpcUrl: plan.rpcUrl,
          tokenAddress: lower(plan.tokenAddress),
          minConfirmations: 1,
          ...x402,
        },
        logger,
      ).then((server) => {
        done(`pgtoll up: embedded PostgreSQL, REST API ${server.httpUrl}, wire proxy ${server.proxyUrl}`);
        return server;
      }),
    ]);
    if (chainStart.status === "fulfilled") cleanups.push(() => chainStart.value.chain.stop());
    if (serverStart.status === "fulfilled") cleanups.push(() => serverStart.value.stop());
    if (chainStart.status === "rejected") throw chainStart.reason;
    if (serverStart.status === "rejected") throw serverStart.reason;
    const demo = chainStart.value;
    const server = serverStart.value;
    logger.info({ rpcUrl: plan.rpcUrl, token: plan.tokenAddress }, "local chain started");
    // Minting is open on the dev token: the x402 agent mints its own on-chain funds.
    await mintTokens(
      demo.chain,
      x402Agent.privateKey,
      demo.token.address,
      x402Agent.address,
      X402_AGENT_FUNDS_MICRO,
    );
    done(`${formatMicro(X402_AGENT_FUNDS_MICRO)} dev USDC minted to the x402 demo agent`);
    step();

    const sample = await prepareSampleDatabase(server.embedded?.adminUrl ?? server.databaseUrl);
    done(
      `sample database ${sample.database} loaded: ${sample.tables.map((t) => `${t.table} (${t.rows} rows)`).join(", ")}`,
    );
    step();
    const httpUrl = dialUrl(server.httpUrl).origin;
    const provider = await ensureSampleProvider({
      httpUrl,
      databaseUrl: server.databaseUrl,
      box: createSecretBox(await loadSecretKey(config.secretKey, config.dataDir)),
      walletAddress: demo.provider.address.toLowerCase(),
      connectionString: sample.connectionString,
    });
    done(
      `sample provider ${provider.registered ? "registered and priced" : "of an earlier run reused and priced"}`,
    );
    step();

    const agentWallet = demo.agent.address.toLowerCase();
    const agentToken = await createAgentToken(demo.agent.privateKey, provider.id);
    const restAuth = config.restAgentAuth === "signature";
    const deposit = await fundDemoAgent({
      endpoint: demo.chain,
      token: demo.token.address,
      agentKey: demo.agent.privateKey,
      agentWallet,
      providerWallet: demo.provider.address,
      providerId: provider.id,
      amountMicro: DEMO_DEPOSIT_MICRO,
      httpUrl,
      headers: restAuth ? { authorization: `Bearer ${agentToken}` } : {},
    });
    done(
      `demo agent funded: ${formatMicro(DEMO_DEPOSIT_MICRO)} USDC sent on chain to the provider and credited (POST /api/deposit)`,
    );
    step();

    await writeDevState(config.dataDir, {
      rpcUrl: demo.chain.rpcUrl,
      chainId: demo.chain.chainId,
      tokenAddress: demo.token.address,
      agentAccountIndex: DEV_ACCOUNT.agent,
      providerId: provider.id,
      providerWallet: demo.provider.address,
      ...(server.embedded
        ? {
            cluster: {
              port: server.embedded.port,
              metadataDatabase: new URL(server.databaseUrl).pathname.slice(1),
            },
          }
        : {}),
    });
    cleanups.push(() => removeDevState(config.dataDir));

    return {
      info: {
        httpUrl: server.httpUrl,
        proxyUrl: server.proxyUrl,
        tls: Boolean((tls.tlsCert ?? config.tlsCert) && (tls.tlsKey ?? config.tlsKey)),
        ...(rootCert ? { tlsRootCert: rootCert } : {}),
        rpcUrl: demo.chain.rpcUrl,
        chainId: demo.chain.chainId,
        tokenAddress: demo.token.address,
        provider: {
          id: provider.id,
          name: SAMPLE_PROVIDER.name,
          registered: provider.registered,
          apiKey: provider.apiKey,
        },
        price: DEMO_PRICE,
        database: sample.database,
        tables: sample.tables,
        agent: { wallet: agentWallet, privateKey: demo.agent.privateKey, accountIndex: DEV_ACCOUNT.agent },
        x402Agent: {
          wallet: x402Agent.address.toLowerCase(),
          privateKey: x402Agent.privateKey,
          accountIndex: DEV_ACCOUNT.x402Agent,
          onChainMicro: X402_AGENT_FUNDS_MICRO,
          minTopupMicro: config.x402MinTopupMicro,
        },
        deposit: { txHash: deposit.txHash, amountMicro: DEMO_DEPOSIT_MICRO, balance: deposit.balance },
        agentToken,
        tokenLifetimeMinutes: AGENT_TOKEN_LIFETIME_S / 60,
        ...(restAuth ? { restBearer: agentToken } : {}),
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
