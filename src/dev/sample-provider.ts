import pg from "pg";
import { parsePriceDimensions, parsePricing } from "../billing/pricing.js";
import { parseTableName } from "../guard/relation-names.js";
import { generateApiKey } from "../providers/api-key.js";
import { setPricing } from "../providers/registry.js";
import type { SecretBox } from "../providers/secret-box.js";
import { DEMO_PRICE, SAMPLE_LISTING, SAMPLE_PROVIDER } from "./demo-defaults.js";
import { postJson, putJson } from "./rest-client.js";

export interface SampleProvider {
  id: string;
  walletAddress: string;
  /** True when this call registered it; false when an earlier `pgtoll dev` on the same data directory had. */
  registered: boolean;
  /** Its API key (for the console): the registration's, or on a later run a new one that replaces it. */
  apiKey: string;
}

interface Options {
  /** Base URL of pgtoll's REST API, e.g. http://127.0.0.1:3000. */
  httpUrl: string;
  /** The metadata database, for finding an earlier run's provider. */
  databaseUrl: string;
  box: SecretBox;
  walletAddress: string;
  /** The sample database's connection string as of this run. */
  connectionString: string;
}

async function register(options: Options): Promise<SampleProvider> {
  const { provider, apiKey } = await postJson<{ provider: { id: string }; apiKey: string }>(
    `${options.httpUrl}/api/providers/register`,
    { ...SAMPLE_PROVIDER, walletAddress: options.walletAddress, connectionString: options.connectionString },
  );
  await postJson(`${options.httpUrl}/api/providers/${provider.id}/pricing`, DEMO_PRICE, {
    "x-api-key": apiKey,
  });
  return { id: provider.id, walletAddress: options.walletAddress, registered: true, apiKey };
}

/**
 * The sample provider of this data directory, registered through the REST API on the first run and priced
 * through it with the key the registration returned.
 *
 * Later runs reuse it, keeping its id, balances and ledger: the registration cannot be repeated (its wallet is
 * taken, 409) and its API key is not kept. What changes between runs is written directly: the connection
 * string (the embedded PostgreSQL listens on a new port and the sample role has a new password each run), the
 * demo price, and a new API key (printed for the console; the earlier run's key stops working). Throws when the sample provider's wallet belongs to another provider of this directory.
 * Each run lists it in the catalog (SAMPLE_LISTING).
 */
export async function ensureSampleProvider(options: Options): Promise<SampleProvider> {
  const provider = await registeredSampleProvider(options);
  // Through the API on every run: its tables are read again from the sample database of this run.
  await putJson(`${options.httpUrl}/api/providers/${provider.id}/listing`, SAMPLE_LISTING, {
    "x-api-key": provider.apiKey,
  });
  return provider;
}

async function registeredSampleProvider(options: Options): Promise<SampleProvider> {
  const db = new pg.Client({ connectionString: options.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ id: string; email: string }>(
      "SELECT id, email FROM providers WHERE wallet_address = $1",
      [options.walletAddress.toLowerCase()],
    );
    const earlier = rows[0];
    if (!earlier) return await register(options);
    if (earlier.email.toLowerCase() !== SAMPLE_PROVIDER.email) {
      throw new Error(
        `the sample provider's wallet ${options.walletAddress} is registered to provider ${earlier.id} (${earlier.email}) in this data directory; use another PGTOLL_DATA_DIR`,
      );
    }
    const key = generateApiKey();
    await db.query("UPDATE providers SET connection_secret = $2, api_key_hash = $3 WHERE id = $1", [
      earlier.id,
      options.box.seal(options.connectionString),
      key.hash,
    ]);
    await setPricing(db, earlier.id, {
      ...parsePricing(DEMO_PRICE.basePricePer1000Rows, DEMO_PRICE.markupMultiplier),
      ...parsePriceDimensions(DEMO_PRICE, parseTableName),
    });
    return { id: earlier.id, walletAddress: options.walletAddress, registered: false, apiKey: key.key };
  } finally {
    await db.end();
  }
}
