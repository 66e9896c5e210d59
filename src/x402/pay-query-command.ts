import { decodePaymentResponseHeader, decodePaymentSignatureHeader } from "@x402/core/http";
import { privateKeyToAccount } from "viem/accounts";
import { formatMicro, parseMicro } from "../billing/money.js";
import { takeFlags, UsageError } from "../command-flags.js";
import { loadConfig } from "../config.js";
import { AGENT_KEY_VARIABLE, readAgentKey } from "../proxy/agent-token-command.js";
import { payingFetch } from "./paying-fetch.js";

export const PAY_QUERY_USAGE = `Usage: ${AGENT_KEY_VARIABLE}=0x<64 hex digits> pgtoll pay-query --provider ID --sql SQL [--url HTTP_URL] [--max-payment USDC]

Runs SQL with POST /api/query and pays for it with x402 when the balance cannot: the gateway's 402 is
signed for (EIP-3009, the official x402 client) with the key's wallet and sent again with PAYMENT-SIGNATURE.
Prints the status, what it paid (the gateway asks for at least its minimum top-up, PGTOLL_X402_MIN_TOPUP,
1 USDC by default; what the query does not spend stays as balance), the balance left with the provider,
the decoded PAYMENT-RESPONSE (the settlement transaction) and the answer.
  --url            the gateway (default http://127.0.0.1:3000)
  --max-payment    most one payment may carry, in USDC (default 1): a larger request is not signed
  --chain-id, --token-address   the chain and token to pay on (default: PGTOLL_CHAIN_ID, PGTOLL_TOKEN_ADDRESS)
`;

/**
 * `pgtoll pay-query`: an x402 client in one command, for trying pay-as-you-query from a shell. Returns the text
 * to print. Warning: it signs payments with the key in PGTOLL_AGENT_KEY, up to --max-payment each.
 */
export async function payQueryCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const flags = {
    provider: "value",
    sql: "value",
    url: "value",
    "max-payment": "value",
    help: "boolean",
  } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (values.help) return PAY_QUERY_USAGE.trimEnd();
  const config = loadConfig(env, rest, Object.keys(flags));
  if (typeof values.provider !== "string" || typeof values.sql !== "string")
    throw new UsageError(`--provider and --sql are required\n\n${PAY_QUERY_USAGE}`);
  const maxPaymentMicro = parseMicro(typeof values["max-payment"] === "string" ? values["max-payment"] : "1");
  if (maxPaymentMicro === null || maxPaymentMicro <= 0n)
    throw new UsageError(`--max-payment must be a positive USDC amount, got "${values["max-payment"]}"`);
  const account = privateKeyToAccount(readAgentKey(env));
  // What was signed is what is paid: the amount of the offer the retry carries in PAYMENT-SIGNATURE.
  let paidMicro = 0n;
  const seeingPayment: typeof fetch = (input, init) => {
    const request = new Request(input, init);
    const signature = request.headers.get("payment-signature");
    if (signature) paidMicro = BigInt(decodePaymentSignatureHeader(signature).accepted.amount);
    return fetch(request);
  };
  const pay = payingFetch(account, {
    chainId: config.chainId,
    tokenAddress: config.tokenAddress,
    maxPaymentMicro,
    fetch: seeingPayment,
  });
  const gateway = typeof values.url === "string" ? values.url : "http://127.0.0.1:3000";
  const wallet = account.address.toLowerCase();
  const response = await pay(`${gateway}/api/query`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      sql: values.sql,
      agentWallet: wallet,
      providerId: values.provider,
    }),
  });
  const settlement = response.headers.get("payment-response");
  const body = await response.json();
  return JSON.stringify(
    {
      status: response.status,
      paid: formatMicro(paidMicro),
      balance: await balanceLeft(gateway, wallet, values.provider),
      ...(settlement ? { paymentResponse: decodePaymentResponseHeader(settlement) } : {}),
      body,
    },
    null,
    2,
  );
}

/** The agent's balance with the provider after the query, or null when the gateway does not say. */
async function balanceLeft(gateway: string, wallet: string, providerId: string): Promise<string | null> {
  try {
    const answer = await fetch(`${gateway}/api/balance/${wallet}/${encodeURIComponent(providerId)}`);
    if (!answer.ok) return null;
    return ((await answer.json()) as { balance?: string }).balance ?? null;
  } catch {
    return null;
  }
}
