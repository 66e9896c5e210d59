/** What `pgtoll dev` sets up: the sample provider, its price, and the demo agent's money. */

/** The sample provider's registration. The email tells `pgtoll dev` which provider of a data directory is its own. */
export const SAMPLE_PROVIDER = {
  name: "Airports sample (pgtoll dev)",
  email: "airports-sample@example.com",
} as const;

/** The sample provider's catalog listing (`PUT /api/providers/:id/listing`): listed, so agents can find it. */
export const SAMPLE_LISTING = {
  listed: true,
  name: "Airports of the world",
  description:
    "Large and medium airports with their countries and regions: codes, names, positions, elevations.",
  tags: ["aviation", "airports", "geography"],
  tableDescriptions: {
    airports: {
      description: "one row per large or medium airport",
      columns: { iata_code: "IATA code, e.g. AKL", elevation_ft: "elevation in feet" },
    },
    countries: { description: "ISO 3166 countries" },
    regions: { description: "ISO 3166-2 regions" },
  },
} as const;

/**
 * 0.05 USDC per 1000 rows with a 1.2 markup: 0.00006 USDC (60 micro-USDC) a row; 0.05 USDC per MB of result
 * (0.06 with the markup) and at least 0.0001 USDC a statement, so that a count(*) over a big table is not free.
 */
export const DEMO_PRICE = {
  basePricePer1000Rows: 0.05,
  markupMultiplier: 1.2,
  minimumCostPerStatement: 0.0001,
  pricePerMB: 0.05,
} as const;

/** Minted to the demo agent on each fresh chain, in micro-USDC (1000 USDC). */
export const DEMO_MINT_MICRO = 1_000_000_000n;

/** Sent on chain to the provider and deposited at each start, in micro-USDC (10 USDC). */
export const DEMO_DEPOSIT_MICRO = 10_000_000n;

/**
 * Indexes of hardhat's dev accounts. WARNING: their private keys are public knowledge; `pgtoll dev` prints
 * the demo agent's. Never send real funds to them.
 */
export const DEV_ACCOUNT = { funder: 0, provider: 1, agent: 2, x402Settler: 3, x402Agent: 4 } as const;

/** Minted on chain to the x402 demo agent at each start (it pays as it queries: no balance with the provider). */
export const X402_AGENT_FUNDS_MICRO = 10_000_000n;
