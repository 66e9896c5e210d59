import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import { Ajv2020 } from "ajv/dist/2020.js";
import { getAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
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
import { payingFetch } from "../../src/x402/paying-fetch.js";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

/**
 * An x402 client that knows pgtoll's base URL and nothing else: it finds a provider in `GET /discovery/resources`,
 * builds its request from the `bazaar` declaration alone, and pays the 402 with the official client.
 */

let chain: LocalChain;
let token: TestToken;
let gateway: TestGateway;
let baseUrl: string;
let providerDb: OwnedTestDatabase;
let listed: { providerId: string; apiKey: string; walletAddress: string };
const agents: { key: Hex; address: string }[] = [];

const TAG = "retail";
const SQL = "SELECT id, name FROM items WHERE id <= 10 ORDER BY id";
const MIN_TOPUP = 500_000n; // 0.5 USDC

/** A JSON Schema validator (draft 2020-12) as a facilitator or client would use, knowing the `uuid` format. */
const ajv = new Ajv2020({
  strict: false,
  formats: { uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i },
});

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, settler, ...rest] = chain.accounts;
  token = await deployTestToken(chain, deployer!.privateKey);
  for (const account of rest.slice(0, 2)) {
    agents.push({ key: account.privateKey, address: account.address.toLowerCase() });
    await mintTokens(chain, deployer!.privateKey, token, account.address, 1_000_000_000n);
  }
  gateway = await startTestGateway({
    verifier: createChainVerifier({
      rpcUrl: chain.rpcUrl,
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
      PGTOLL_X402_SETTLER_KEY: settler!.privateKey,
      PGTOLL_CATALOG_REFRESH_INTERVAL_MS: "0",
    },
  });
  baseUrl = await gateway.app.listen({ host: "127.0.0.1", port: 0 });
  providerDb = await createProviderDatabase(50);
  // An unlisted provider first: the client must pick the listed one by what the catalog says of it.
  await registerPricedProvider(gateway, providerDb.url);
  listed = await registerPricedProvider(gateway, providerDb.url);
  const put = await gateway.app.inject({
    method: "PUT",
    url: `/api/providers/${listed.providerId}/listing`,
    headers: { "x-api-key": listed.apiKey },
    payload: { listed: true, name: "Shop data", description: "Items and orders of a shop.", tags: [TAG] },
  });
  expect(put.statusCode, put.body).toBe(200);
}, 120_000);
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
  await chain?.stop();
});

interface PropertySchema {
  type?: string | string[];
  const?: unknown;
  pattern?: string;
}
interface BodySchema {
  properties: Record<string, PropertySchema>;
  required?: string[];
}
interface Bazaar {
  info: { input: { type: string; method: string; bodyType: string; body: Record<string, unknown> } };
  schema: { properties: { input: { properties: { body: BodySchema } } } };
}
interface DiscoveredResource {
  resource: string;
  accepts: { network: string; asset: string; payTo: string; amount: string }[];
  metadata: { tags?: string[]; serviceName?: string };
  extensions: { bazaar: Bazaar };
}

/** What the client learns from the catalog: where to send what, and the payment it will be asked for. */
interface Endpoint {
  url: string;
  method: string;
  bazaar: Bazaar;
  accepts: DiscoveredResource["accepts"][number];
}

async function discover(tag: string): Promise<Endpoint> {
  const response = await fetch(`${baseUrl}/discovery/resources?extensions=bazaar`);
  expect(response.status).toBe(200);
  const page = (await response.json()) as { items: DiscoveredResource[] };
  const item = page.items.find((candidate) => candidate.metadata.tags?.includes(tag));
  if (!item) throw new Error(`no resource tagged ${tag} in the catalog`);
  const { bazaar } = item.extensions;
  // A facilitator's check: the declaration validates against its own schema.
  expect(ajv.validate(bazaar.schema, bazaar.info)).toBe(true);
  expect(bazaar.info.input).toMatchObject({ type: "http", bodyType: "json" });
  return { url: item.resource, method: bazaar.info.input.method, bazaar, accepts: item.accepts[0]! };
}

/**
 * The body built from the declaration alone: every required field is either fixed by the schema (`const`), the
 * payer's address (the field whose pattern an EVM address matches), or the SQL. An example value is a
 * placeholder, never taken as it is; a required field the declaration does not explain is an error.
 */
function bodyFromDeclaration(bazaar: Bazaar, own: { wallet: string; sql: string }): Record<string, unknown> {
  const schema = bazaar.schema.properties.input.properties.body;
  const body: Record<string, unknown> = {};
  for (const name of schema.required ?? []) {
    const property = schema.properties[name];
    if (!property) throw new Error(`the declaration requires ${name} but does not describe it`);
    if ("const" in property) body[name] = property.const;
    else if (property.pattern && new RegExp(property.pattern).test(own.wallet)) body[name] = own.wallet;
    else if (name === "sql") body[name] = own.sql;
    else throw new Error(`the declaration does not say what to send as ${name}`);
  }
  const walletFields = Object.keys(body).filter((name) => body[name] === own.wallet);
  if (walletFields.length !== 1) throw new Error("the declaration names no single field for the payer");
  if (body.sql === undefined) throw new Error("the declaration has no field for the SQL");
  expect(ajv.validate(schema, body)).toBe(true);
  return body;
}

function chainIdOf(network: string): number {
  const match = /^eip155:(\d+)$/.exec(network);
  if (!match) throw new Error(`not an EVM network: ${network}`);
  return Number(match[1]);
}

async function ledgerOf(agent: string) {
  const response = await fetch(`${baseUrl}/api/transactions/${agent}?providerId=${listed.providerId}`);
  return ((await response.json()) as { transactions: Record<string, unknown>[] }).transactions;
}

describe("an x402 client with nothing but pgtoll's base URL", () => {
  it("finds a listed provider in the discovery list, builds its query from the declaration, and pays the 402", async () => {
    const agent = agents[0]!;
    const endpoint = await discover(TAG);
    expect(endpoint.url).toBe(`${baseUrl}/api/query`);
    expect(endpoint.method).toBe("POST");
    const body = JSON.stringify(bodyFromDeclaration(endpoint.bazaar, { wallet: agent.address, sql: SQL }));

    // The 402 of the endpoint declares the same resource the catalog listed.
    const unpaid = await fetch(endpoint.url, {
      method: endpoint.method,
      headers: { "content-type": "application/json" },
      body,
    });
    expect(unpaid.status).toBe(402);
    const required = decodePaymentRequiredHeader(unpaid.headers.get("payment-required") ?? "");
    expect(required.resource.url).toBe(endpoint.url);
    expect(required.extensions?.bazaar).toEqual(endpoint.bazaar);
    expect(required.accepts[0]).toMatchObject({
      network: endpoint.accepts.network,
      asset: endpoint.accepts.asset,
      payTo: endpoint.accepts.payTo,
    });
    expect(getAddress(endpoint.accepts.payTo)).toBe(getAddress(listed.walletAddress));

    const agentTokensBefore = await tokenBalance(chain, token, agent.address as Hex);
    const providerTokensBefore = await tokenBalance(chain, token, listed.walletAddress as Hex);
    // The client pays only in the asset and on the network the catalog offered, 5 USDC at most a payment.
    const pay = payingFetch(privateKeyToAccount(agent.key), {
      chainId: chainIdOf(endpoint.accepts.network),
      tokenAddress: endpoint.accepts.asset,
      maxPaymentMicro: 5_000_000n,
    });
    const paid = await pay(endpoint.url, {
      method: endpoint.method,
      headers: { "content-type": "application/json" },
      body,
    });
    const result = (await paid.json()) as { rows: { id: number }[]; rowCount: number; actualCost: string };
    expect(paid.status, JSON.stringify(result)).toBe(200);
    expect(result.rowCount).toBe(10);
    expect(result.rows.map((row) => row.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(result.actualCost).toBe("0.010000");
    const settlement = decodePaymentResponseHeader(paid.headers.get("payment-response") ?? "");
    expect(settlement).toMatchObject({ success: true, payer: getAddress(agent.address) });

    expect(await tokenBalance(chain, token, agent.address as Hex)).toBe(agentTokensBefore - MIN_TOPUP);
    expect(await tokenBalance(chain, token, listed.walletAddress as Hex)).toBe(
      providerTokensBefore + MIN_TOPUP,
    );
    const [charge, credit, ...older] = await ledgerOf(agent.address);
    expect(older).toEqual([]);
    expect(credit).toMatchObject({
      type: "deposit",
      amount: "0.500000",
      txHash: settlement.transaction.toLowerCase(),
      metadata: { source: "x402" },
    });
    expect(charge).toMatchObject({ type: "query", amount: "-0.010000", balanceAfter: "0.490000" });
  });

  it("the declaration's example body alone is not a paid query: its wallet is a placeholder the payment must match", async () => {
    const agent = agents[1]!;
    const endpoint = await discover(TAG);
    const example = endpoint.bazaar.info.input.body;
    const pay = payingFetch(privateKeyToAccount(agent.key), {
      chainId: chainIdOf(endpoint.accepts.network),
      tokenAddress: endpoint.accepts.asset,
      maxPaymentMicro: 5_000_000n,
    });
    const providerTokensBefore = await tokenBalance(chain, token, listed.walletAddress as Hex);
    const answer = await pay(endpoint.url, {
      method: endpoint.method,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...example, sql: SQL }),
    });
    expect(answer.status).toBe(402);
    expect(((await answer.json()) as { error: string }).error).toMatch(
      /is from .* but the request is for agent/,
    );
    expect(await tokenBalance(chain, token, listed.walletAddress as Hex)).toBe(providerTokensBefore);
  });
});
