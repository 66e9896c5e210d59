import { createServer } from "node:net";
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { getAddress, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainVerifier } from "../../src/billing/chain-verify.js";
import {
  deployTestToken,
  type LocalChain,
  mintTokens,
  startLocalChain,
  type TestToken,
  tokenBalance,
} from "../../src/devchain/index.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { payingFetch } from "../../src/x402/paying-fetch.js";
import { AUTHORIZATION_CLOCK_SKEW_SECONDS, MAX_TIMEOUT_SECONDS } from "../../src/x402/payment-terms.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { startTestProxy } from "../support/proxy.js";
import { missingTool, runProcess, waitForCharges } from "../support/real-clients.js";
import { signedPayment, startHttpFacilitator } from "../support/x402.js";

const PSQL = "/usr/bin/psql";
const skipPsql = missingTool(PSQL, "apt-get install postgresql-client") !== null;

let chain: LocalChain;
let token: TestToken;
let otherToken: TestToken;
let gateway: TestGateway;
let baseUrl: string;
let providerDb: TestDatabase;
let provider: { providerId: string; walletAddress: string };
let settlerKey: Hex;
const agents: { key: Hex; address: string }[] = [];

const SQL = "SELECT id, name FROM items WHERE id <= 10 ORDER BY id";
const MIN_TOPUP = 500_000n; // 0.5 USDC

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function gatewayFor(env: Record<string, string>): Promise<{ gateway: TestGateway; url: string }> {
  const started = await startTestGateway({
    verifier: createChainVerifier({
      rpcUrl: env.PGTOLL_RPC_URL ?? chain.rpcUrl,
      chainId: 8453,
      tokenAddress: token.address,
      minConfirmations: 1,
      rpcTimeoutMs: 2000,
      rpcRetryCount: 0,
    }),
    env: {
      PGTOLL_RPC_URL: chain.rpcUrl,
      PGTOLL_TOKEN_ADDRESS: token.address,
      PGTOLL_X402_MIN_TOPUP: "0.5",
      ...env,
    },
  });
  const url = await started.app.listen({ host: "127.0.0.1", port: 0 });
  return { gateway: started, url };
}

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, settler, ...rest] = chain.accounts;
  settlerKey = settler!.privateKey;
  token = await deployTestToken(chain, deployer!.privateKey);
  otherToken = await deployTestToken(chain, deployer!.privateKey);
  for (const account of rest.slice(0, 6)) {
    agents.push({ key: account.privateKey, address: account.address.toLowerCase() });
    await mintTokens(chain, deployer!.privateKey, token, account.address, 1_000_000_000n);
  }
  ({ gateway, url: baseUrl } = await gatewayFor({ PGTOLL_X402_SETTLER_KEY: settlerKey }));
  providerDb = await createProviderDatabase(50);
  provider = await registerPricedProvider(gateway, providerDb.url);
}, 120_000);
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
  await chain?.stop();
});

/** POSTs `body` to `url` with the official x402 client paying as `key`, at most `maxPaymentMicro` a payment. */
function payAs(key: Hex, url: string, body: string, maxPaymentMicro: bigint): Promise<Response> {
  const pay = payingFetch(privateKeyToAccount(key), {
    chainId: 8453,
    tokenAddress: token.address,
    maxPaymentMicro,
  });
  return pay(url, { method: "POST", headers: { "content-type": "application/json" }, body });
}

/** A response's JSON body, as the loose object a test reads fields of. */
async function bodyOf(response: Response): Promise<Record<string, unknown>> {
  return (await response.json()) as Record<string, unknown>;
}

function queryBody(agent: string, sql = SQL) {
  return JSON.stringify({ sql, agentWallet: agent, providerId: provider.providerId });
}

function post(path: string, body: string, headers: Record<string, string> = {}, url = baseUrl) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
}

async function ledgerOf(agent: string) {
  const response = await fetch(`${baseUrl}/api/transactions/${agent}?providerId=${provider.providerId}`);
  return (await bodyOf(response)).transactions as {
    type: string;
    amount: string;
    txHash: string | null;
    balanceAfter: string;
    metadata: Record<string, unknown>;
  }[];
}

async function balanceOf(agent: string): Promise<string> {
  return (await bodyOf(await fetch(`${baseUrl}/api/balance/${agent}/${provider.providerId}`)))
    .balance as string;
}

async function requirementsFor(agent: string, sql = SQL): Promise<PaymentRequirements> {
  const response = await post("/api/query", queryBody(agent, sql));
  expect(response.status).toBe(402);
  return decodePaymentRequiredHeader(response.headers.get("payment-required") ?? "").accepts[0]!;
}

describe("x402 on POST /api/query", () => {
  it("the official client pays a query from zero balance: 402, then 200 with PAYMENT-RESPONSE, tokens moved, credit and charge in the ledger", async () => {
    const agent = agents[0]!;
    const unpaid = await post("/api/query", queryBody(agent.address));
    expect(unpaid.status).toBe(402);
    const body = await bodyOf(unpaid);
    expect(body.error).toMatch(
      /^insufficient balance: deposit funds with this provider first, or pay for it with x402/,
    );
    const required: PaymentRequired = decodePaymentRequiredHeader(
      unpaid.headers.get("payment-required") ?? "",
    );
    expect(required.x402Version).toBe(2);
    expect(required.resource.url).toBe(`${baseUrl}/api/query`);
    expect(required.accepts).toEqual([
      {
        scheme: "exact",
        network: "eip155:8453",
        asset: getAddress(token.address),
        amount: MIN_TOPUP.toString(),
        payTo: getAddress(provider.walletAddress),
        maxTimeoutSeconds: 120,
        extra: { name: "USD Coin", version: "2" },
      },
    ]);
    expect(body.accepts).toEqual(required.accepts);

    const agentTokensBefore = await tokenBalance(chain, token, agent.address as Hex);
    const providerTokensBefore = await tokenBalance(chain, token, provider.walletAddress as Hex);
    const paid = await payAs(agent.key, `${baseUrl}/api/query`, queryBody(agent.address), 5_000_000n);
    expect(paid.status).toBe(200);
    const result = await bodyOf(paid);
    expect(result.rowCount).toBe(10);
    expect(result.actualCost).toBe("0.010000");
    const settlement = decodePaymentResponseHeader(paid.headers.get("payment-response") ?? "");
    expect(settlement).toMatchObject({
      success: true,
      network: "eip155:8453",
      payer: getAddress(agent.address),
    });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);

    expect(await tokenBalance(chain, token, agent.address as Hex)).toBe(agentTokensBefore - MIN_TOPUP);
    expect(await tokenBalance(chain, token, provider.walletAddress as Hex)).toBe(
      providerTokensBefore + MIN_TOPUP,
    );
    const [charge, credit] = await ledgerOf(agent.address);
    expect(credit).toMatchObject({
      type: "deposit",
      amount: "0.500000",
      txHash: settlement.transaction.toLowerCase(),
      metadata: { source: "x402", nonce: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
    });
    expect(charge).toMatchObject({ type: "query", amount: "-0.010000", balanceAfter: "0.490000" });
    expect(await balanceOf(agent.address)).toBe("0.490000");

    // With a balance, the next query needs no payment.
    const again = await post("/api/query", queryBody(agent.address));
    expect(again.status).toBe(200);
    expect(again.headers.get("payment-response")).toBeNull();
  });

  it("asks for the estimated cost when it is more than the minimum top-up", async () => {
    const dear = await registerPricedProvider(gateway, providerDb.url, {
      basePricePer1000Rows: 100,
      markupMultiplier: 1,
    });
    const response = await post(
      "/api/query",
      JSON.stringify({
        sql: "SELECT g FROM generate_series(1, 50) g",
        agentWallet: agents[1]!.address,
        providerId: dear.providerId,
      }),
    );
    expect(response.status).toBe(402);
    const [offer] = decodePaymentRequiredHeader(response.headers.get("payment-required") ?? "").accepts;
    expect(offer!.amount).toBe("5000000"); // 50 rows estimated x 0.1 USDC
    expect(offer!.payTo).toBe(getAddress(dear.walletAddress));
  });

  it("a refused statement takes no payment", async () => {
    const agent = agents[1]!;
    const requirements = await requirementsFor(agent.address);
    const header = await signedPayment(agent.key, requirements);
    const response = await post("/api/query", queryBody(agent.address, "DROP TABLE items"), {
      "payment-signature": header,
    });
    expect(response.status).toBe(403);
    expect(await balanceOf(agent.address)).toBe("0");
  });

  describe("refusals: the spec's reason, a new PAYMENT-REQUIRED, nothing credited", () => {
    const cases: [
      string,
      (requirements: PaymentRequirements, key: Hex) => Promise<string>,
      number,
      RegExp,
    ][] = [
      [
        "an expired window",
        (r, k) => signedPayment(k, r, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 10) }),
        402,
        /invalid_exact_evm_payload_authorization_valid_before/,
      ],
      [
        "a window ten years long (longer than the offer's maxTimeoutSeconds)",
        (r, k) =>
          signedPayment(k, r, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 10 * 365 * 86_400) }),
        402,
        /invalid_exact_evm_payload_authorization_valid_before.*at most 120 s \(maxTimeoutSeconds\)/,
      ],
      [
        "a window just past maxTimeoutSeconds and the clock skew",
        (r, k) =>
          signedPayment(k, r, {
            validBefore: BigInt(
              Math.floor(Date.now() / 1000) + MAX_TIMEOUT_SECONDS + AUTHORIZATION_CLOCK_SKEW_SECONDS + 5,
            ),
          }),
        402,
        /invalid_exact_evm_payload_authorization_valid_before/,
      ],
      [
        "a window not yet valid",
        (r, k) => signedPayment(k, r, { validAfter: BigInt(Math.floor(Date.now() / 1000) + 3600) }),
        402,
        /invalid_exact_evm_payload_authorization_valid_after/,
      ],
      [
        "another payTo",
        (r, k) => signedPayment(k, { ...r, payTo: agents[5]!.address }),
        402,
        /invalid_exact_evm_payload_recipient_mismatch/,
      ],
      [
        "a value below the requirement",
        (r, k) => signedPayment(k, r, { value: 100_000n }),
        402,
        /invalid_exact_evm_payload_authorization_value_mismatch.*at least 0.500000/,
      ],
      [
        "another asset",
        (r, k) => signedPayment(k, { ...r, asset: getAddress(otherToken.address) }),
        402,
        /invalid_payment_requirements/,
      ],
      [
        "another network",
        (r, k) => signedPayment(k, r, { accepted: { network: "eip155:1" } }),
        402,
        /invalid_network/,
      ],
      [
        "a signature by another key",
        (r, k) => signedPayment(k, r, { signerKey: agents[5]!.key }),
        402,
        /invalid_exact_evm_signature/,
      ],
      [
        "a payment from another wallet than the agent's",
        (r) => signedPayment(agents[5]!.key, r),
        402,
        /is from .* but the request is for agent/,
      ],
      [
        "a header that is not a payment",
        async () => "not base64 json",
        400,
        /invalid PAYMENT-SIGNATURE header/,
      ],
    ];
    for (const [name, make, status, reason] of cases) {
      it(name, async () => {
        const agent = agents[2]!;
        const requirements = await requirementsFor(agent.address);
        const providerTokens = await tokenBalance(chain, token, provider.walletAddress as Hex);
        const response = await post("/api/query", queryBody(agent.address), {
          "payment-signature": await make(requirements, agent.key),
        });
        expect(response.status).toBe(status);
        expect((await bodyOf(response)).error).toMatch(reason);
        if (status === 402) expect(response.headers.get("payment-required")).toBeTruthy();
        expect(await balanceOf(agent.address)).toBe("0");
        expect(await tokenBalance(chain, token, provider.walletAddress as Hex)).toBe(providerTokens);
      });
    }

    it("a replayed authorization", async () => {
      const agent = agents[3]!;
      const header = await signedPayment(agent.key, await requirementsFor(agent.address));
      const first = await post("/api/query", queryBody(agent.address), { "payment-signature": header });
      expect(first.status).toBe(200);
      expect(await balanceOf(agent.address)).toBe("0.490000");
      const replay = await post("/api/query", queryBody(agent.address), { "payment-signature": header });
      expect(replay.status).toBe(402);
      expect((await bodyOf(replay)).error).toMatch(/invalid_exact_evm_nonce_already_used/);
      // The query was not run either: one charge, one credit.
      expect(await balanceOf(agent.address)).toBe("0.490000");
      expect((await ledgerOf(agent.address)).map((e) => e.type)).toEqual(["query", "deposit"]);
    });

    it("an agent whose wallet lacks the funds", async () => {
      const poor = chain.accounts[9]!;
      await mintTokens(chain, chain.accounts[0]!.privateKey, token, poor.address, 100_000n);
      const requirements = await requirementsFor(poor.address.toLowerCase());
      const response = await post("/api/query", queryBody(poor.address.toLowerCase()), {
        "payment-signature": await signedPayment(poor.privateKey, requirements),
      });
      expect(response.status).toBe(402);
      expect((await bodyOf(response)).error).toMatch(/insufficient_balance|insufficient_funds|simulation/);
      expect(await balanceOf(poor.address.toLowerCase())).toBe("0");
      expect(await tokenBalance(chain, token, poor.address)).toBe(100_000n);
    });
  });

  it("the same PAYMENT-SIGNATURE sent 20 times at once is settled and credited once", async () => {
    const agent = agents[4]!;
    const header = await signedPayment(agent.key, await requirementsFor(agent.address));
    const providerTokens = await tokenBalance(chain, token, provider.walletAddress as Hex);
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        post("/api/query", queryBody(agent.address), { "payment-signature": header }),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 402)).toHaveLength(19);
    expect(await tokenBalance(chain, token, provider.walletAddress as Hex)).toBe(providerTokens + MIN_TOPUP);
    const ledger = await ledgerOf(agent.address);
    expect(ledger.filter((e) => e.type === "deposit")).toHaveLength(1);
    expect(await balanceOf(agent.address)).toBe("0.490000");
  });
});

describe("x402 through a facilitator's HTTP API", () => {
  it("verifies and settles with the facilitator (PGTOLL_X402_FACILITATOR_URL)", async () => {
    const facilitator = await startHttpFacilitator({ chainId: 8453, rpcUrl: chain.rpcUrl, settlerKey });
    const remote = await gatewayFor({ PGTOLL_X402_FACILITATOR_URL: facilitator.url });
    try {
      const agent = agents[5]!;
      const theirs = await registerPricedProvider(remote.gateway, providerDb.url);
      const body = JSON.stringify({ sql: SQL, agentWallet: agent.address, providerId: theirs.providerId });
      const paid = await payAs(agent.key, `${remote.url}/api/query`, body, 1_000_000n);
      expect(paid.status).toBe(200);
      expect(facilitator.calls).toEqual(["POST /verify", "POST /settle"]);
      expect(await tokenBalance(chain, token, theirs.walletAddress as Hex)).toBe(MIN_TOPUP);
    } finally {
      await remote.gateway.close();
      await facilitator.close();
    }
  });

  for (const [name, env] of [
    [
      "a facilitator that cannot be reached",
      async () => ({ PGTOLL_X402_FACILITATOR_URL: `http://127.0.0.1:${await freePort()}` }),
    ],
    [
      "a chain RPC that cannot be reached",
      async () => ({
        PGTOLL_X402_SETTLER_KEY: settlerKey,
        PGTOLL_RPC_URL: `http://127.0.0.1:${await freePort()}`,
      }),
    ],
  ] as const) {
    it(`${name}: 500, nothing credited`, async () => {
      const down = await gatewayFor(await env());
      try {
        const agent = agents[0]!;
        const theirs = await registerPricedProvider(down.gateway, providerDb.url);
        const body = JSON.stringify({ sql: SQL, agentWallet: agent.address, providerId: theirs.providerId });
        const unpaid = await post("/api/query", body, {}, down.url);
        const requirements = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "")
          .accepts[0]!;
        const response = await post(
          "/api/query",
          body,
          { "payment-signature": await signedPayment(agent.key, requirements) },
          down.url,
        );
        const answer = await response.clone().text();
        expect(response.status, answer).toBe(500);
        expect((await bodyOf(response)).error).toMatch(
          /^payment verification failed: the facilitator or chain RPC could not be used .*nothing was credited/,
        );
        const balance = await bodyOf(
          await fetch(`${down.url}/api/balance/${agent.address}/${theirs.providerId}`),
        );
        expect(balance.balance).toBe("0");
        expect(await tokenBalance(chain, token, theirs.walletAddress as Hex)).toBe(0n);
      } finally {
        await down.gateway.close();
      }
    });
  }
});

describe("CORS with x402 on", () => {
  it("lets browsers send PAYMENT-SIGNATURE and read PAYMENT-REQUIRED and PAYMENT-RESPONSE", async () => {
    const preflight = await gateway.app.inject({
      method: "OPTIONS",
      url: "/api/query",
      headers: {
        origin: "https://agent.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,payment-signature",
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers["access-control-allow-headers"]).toBe(
      "Content-Type, X-API-Key, PAYMENT-SIGNATURE, Access-Control-Expose-Headers",
    );
    const get = await gateway.app.inject({
      method: "GET",
      url: "/api/health",
      headers: { origin: "https://x.example" },
    });
    expect(get.headers["access-control-expose-headers"]).toMatch(/PAYMENT-REQUIRED, PAYMENT-RESPONSE$/);
  });
});

describe("POST /api/topup", () => {
  it("answers 402 with the stated amount, credits the paid top-up, and a psql session through the proxy spends it", async () => {
    const agent = agents[1]!;
    const body = JSON.stringify({ agentWallet: agent.address, providerId: provider.providerId, amount: "2" });
    const unpaid = await post("/api/topup", body);
    expect(unpaid.status).toBe(402);
    const [offer] = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "").accepts;
    expect(offer).toMatchObject({ amount: "2000000", payTo: getAddress(provider.walletAddress) });

    const paid = await payAs(agent.key, `${baseUrl}/api/topup`, body, 2_000_000n);
    expect(paid.status).toBe(200);
    const settlement = decodePaymentResponseHeader(paid.headers.get("payment-response") ?? "");
    expect(await bodyOf(paid)).toEqual({
      success: true,
      balance: "2.000000",
      transaction: { txHash: settlement.transaction, amount: "2.000000", verified: true },
    });

    if (skipPsql) return;
    const proxy = await startTestProxy(gateway);
    try {
      const run = await runProcess(
        PSQL,
        ["-X", "-A", "-t", "-c", "SELECT count(*) FROM items WHERE id <= 25"],
        {
          env: {
            PGPASSWORD: await createAgentToken(agent.key, provider.providerId),
            PGHOST: "127.0.0.1",
            PGPORT: String(proxy.port),
            PGUSER: agent.address,
            PGDATABASE: provider.providerId,
            PGSSLMODE: "disable",
          },
        },
      );
      expect(run.stderr).toBe("");
      expect(run.stdout.trim()).toBe("25");
      await waitForCharges(proxy);
    } finally {
      await proxy.close();
    }
    // One row (the count) at 1 USDC per 1000 rows.
    expect(await balanceOf(agent.address)).toBe("1.999000");
  });

  it("refuses an amount outside the bounds, and a payment of another amount", async () => {
    const agent = agents[2]!;
    for (const [amount, message] of [
      ["0.1", /a top-up is between 0.500000 and 100.000000 USDC, got 0.100000/],
      ["101", /a top-up is between 0.500000 and 100.000000 USDC, got 101.000000/],
      ["lots", /invalid amount: "lots" is not an amount of USDC/],
      [1.0000001, /invalid amount/],
    ] as const) {
      const response = await post(
        "/api/topup",
        JSON.stringify({ agentWallet: agent.address, providerId: provider.providerId, amount }),
      );
      expect(response.status).toBe(400);
      expect((await bodyOf(response)).error).toMatch(message);
    }
    const body = JSON.stringify({ agentWallet: agent.address, providerId: provider.providerId, amount: 1 });
    const [offer] = decodePaymentRequiredHeader(
      (await post("/api/topup", body)).headers.get("payment-required") ?? "",
    ).accepts;
    const response = await post("/api/topup", body, {
      "payment-signature": await signedPayment(agent.key, offer!, { value: 3_000_000n }),
    });
    expect(response.status).toBe(402);
    expect((await bodyOf(response)).error).toMatch(/carries 3.000000 USDC, this top-up is for 1.000000/);
    expect(await balanceOf(agent.address)).toBe("0");
  });

  it("refuses an authorization valid for longer than the offer states, and accepts one within its clock skew", async () => {
    const agent = agents[5]!;
    const body = JSON.stringify({ agentWallet: agent.address, providerId: provider.providerId, amount: 1 });
    const unpaid = await post("/api/topup", body);
    const [offer] = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "").accepts;
    expect(offer!.maxTimeoutSeconds).toBe(MAX_TIMEOUT_SECONDS);
    const agentTokens = await tokenBalance(chain, token, agent.address as Hex);
    const now = BigInt(Math.floor(Date.now() / 1000));

    const tenYears = await post("/api/topup", body, {
      "payment-signature": await signedPayment(agent.key, offer!, { validBefore: now + 315_360_000n }),
    });
    expect(tenYears.status).toBe(402);
    expect((await bodyOf(tenYears)).error).toMatch(/invalid_exact_evm_payload_authorization_valid_before/);
    const again = decodePaymentRequiredHeader(tenYears.headers.get("payment-required") ?? "");
    expect(again.error).toMatch(/invalid_exact_evm_payload_authorization_valid_before/);
    expect(again.accepts[0]).toMatchObject({ amount: "1000000", maxTimeoutSeconds: MAX_TIMEOUT_SECONDS });
    expect(await tokenBalance(chain, token, agent.address as Hex)).toBe(agentTokens);
    expect(await balanceOf(agent.address)).toBe("0");

    const skewed = now + BigInt(MAX_TIMEOUT_SECONDS + AUTHORIZATION_CLOCK_SKEW_SECONDS - 5);
    const paid = await post("/api/topup", body, {
      "payment-signature": await signedPayment(agent.key, offer!, { validBefore: skewed }),
    });
    expect(paid.status, JSON.stringify(await paid.clone().json())).toBe(200);
    expect(await balanceOf(agent.address)).toBe("1.000000");
  });

  it("two payments racing for a wallet that holds enough for one: one settles, the other fails, credited once", async () => {
    const wallet = chain.accounts[8]!;
    const agent = wallet.address.toLowerCase();
    await mintTokens(chain, chain.accounts[0]!.privateKey, token, wallet.address, 1_000_000n);
    const body = JSON.stringify({ agentWallet: agent, providerId: provider.providerId, amount: 1 });
    const [offer] = decodePaymentRequiredHeader(
      (await post("/api/topup", body)).headers.get("payment-required") ?? "",
    ).accepts;
    const headers = await Promise.all([
      signedPayment(wallet.privateKey, offer!),
      signedPayment(wallet.privateKey, offer!),
    ]);
    const responses = await Promise.all(
      headers.map((h) => post("/api/topup", body, { "payment-signature": h })),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 402]);
    const refused = responses.find((r) => r.status === 402)!;
    expect((await bodyOf(refused)).error).toMatch(
      /insufficient|simulation|settlement failed|transaction_failed/,
    );
    expect(await balanceOf(agent)).toBe("1.000000");
    expect(await tokenBalance(chain, token, wallet.address)).toBe(0n);
  });
});

describe("malformed PAYMENT-SIGNATURE headers", () => {
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");
  const cases: [string, (valid: Record<string, unknown>) => string, RegExp][] = [
    ["base64 of null", () => b64(null), /not an x402 payment payload: it is null, not an object/],
    ["base64 of an array", () => b64([1]), /not an x402 payment payload: it is an array, not an object/],
    ["base64 of a string", () => b64("pay"), /not an x402 payment payload: it is a string, not an object/],
    ['"payload": null', (v) => b64({ ...v, payload: null }), /"payload" must be an object, not null/],
    ['"payload": "x"', (v) => b64({ ...v, payload: "x" }), /"payload" must be an object, not a string/],
    ['"accepted": null', (v) => b64({ ...v, accepted: null }), /"accepted" must be an object, not null/],
    [
      '"payload.authorization": null',
      (v) => b64({ ...v, payload: { ...(v.payload as object), authorization: null } }),
      /payload.authorization needs from, to/,
    ],
  ];
  for (const [name, make, message] of cases) {
    it(`${name}: 400 naming what is wrong on /api/query and /api/topup, nothing credited`, async () => {
      const key = generatePrivateKey();
      const agent = { key, address: privateKeyToAccount(key).address.toLowerCase() };
      const requirements = await requirementsFor(agent.address);
      const valid = JSON.parse(
        Buffer.from(await signedPayment(agent.key, requirements), "base64").toString(),
      ) as Record<string, unknown>;
      const header = make(valid);
      const topup = JSON.stringify({
        agentWallet: agent.address,
        providerId: provider.providerId,
        amount: "1",
      });
      for (const [path, body] of [
        ["/api/query", queryBody(agent.address)],
        ["/api/topup", topup],
      ] as const) {
        const response = await post(path, body, { "payment-signature": header });
        const answer = await bodyOf(response);
        expect(response.status, JSON.stringify(answer)).toBe(400);
        expect(answer.error).toMatch(/^invalid PAYMENT-SIGNATURE header: /);
        expect(answer.error).toMatch(message);
      }
      expect(await balanceOf(agent.address)).toBe("0");
    });
  }
});

describe("x402 off", () => {
  it("POST /api/topup is 404 and a 402 offers no payment", async () => {
    const plain = await startTestGateway();
    try {
      const theirs = await registerPricedProvider(plain, providerDb.url);
      const topup = await plain.app.inject({
        method: "POST",
        url: "/api/topup",
        payload: { agentWallet: agents[0]!.address, providerId: theirs.providerId, amount: 1 },
      });
      expect(topup.statusCode).toBe(404);
      expect(topup.json().error).toMatch(/x402 payments are off/);
      const query = await plain.app.inject({
        method: "POST",
        url: "/api/query",
        payload: { sql: SQL, agentWallet: agents[0]!.address, providerId: theirs.providerId },
      });
      expect(query.statusCode).toBe(402);
      expect(query.json()).toEqual({ error: "insufficient balance: deposit funds with this provider first" });
      expect(query.headers["payment-required"]).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});
