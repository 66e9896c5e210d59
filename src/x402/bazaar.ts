/**
 * The x402 v2 `bazaar` extension (specs/extensions/bazaar.md) of `POST /api/query`: how to call it and what it
 * answers, for facilitators and agents that catalog paid endpoints. Declared on the 402s of listed providers
 * only (an unlisted provider is not published), and served by `GET /discovery/resources`.
 */

/** What a listed provider shows of itself in its declaration. */
export interface BazaarListing {
  providerId: string;
  name: string;
  description: string;
  tags: string[];
}

/** An EVM address: what `agentWallet` must be, and how a client tells which field its own wallet goes in. */
const WALLET_PATTERN = "^0x[0-9a-fA-F]{40}$";

/**
 * The JSON Schema of the query body for one provider. The body's example values are placeholders a client
 * replaces, except the provider's id, which is what picks the provider (every listed provider has the same
 * URL): `const` says so. `agentWallet` must be the address that signs the payment (a payment from another
 * wallet is refused), which its pattern and description let a client recognise as its own.
 */
function queryBodySchema(providerId: string) {
  return {
    type: "object",
    properties: {
      sql: { type: "string", description: "one or more SQL statements, $1, $2 ... for params" },
      params: {
        type: "array",
        items: { type: ["string", "number", "boolean", "null"] },
        description: "values for $1, $2 ... (a single statement only)",
      },
      providerId: {
        type: "string",
        format: "uuid",
        const: providerId,
        description: "the provider whose database runs the SQL: this value, as given",
      },
      agentWallet: {
        type: "string",
        pattern: WALLET_PATTERN,
        description: "the payer: the wallet that signs the x402 payment and whose balance is charged",
      },
      maxCost: {
        type: ["string", "number"],
        description: 'USDC this request may cost at most, e.g. "0.05"',
      },
    },
    required: ["sql", "providerId", "agentWallet"],
  } as const;
}

const OUTPUT_EXAMPLE = {
  rows: [{ id: 1 }],
  rowCount: 1,
  estimatedCost: "0.001000",
  actualCost: "0.001000",
  executionTime: "1.20ms",
};

/** The JSON Schema (draft 2020-12) `info` is validated against, as the spec requires for a body method. */
function infoSchema(providerId: string) {
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: {
      input: {
        type: "object",
        properties: {
          type: { type: "string", const: "http" },
          method: { type: "string", enum: ["POST", "PUT", "PATCH"] },
          bodyType: { type: "string", enum: ["json", "form-data", "text"] },
          body: queryBodySchema(providerId),
          queryParams: { type: "object", additionalProperties: { type: "string" } },
          headers: { type: "object", additionalProperties: { type: "string" } },
        },
        required: ["type", "method", "bodyType", "body"],
        additionalProperties: false,
      },
      output: {
        type: "object",
        properties: { type: { type: "string" }, example: { type: "object" } },
        required: ["type"],
      },
    },
    required: ["input"],
  } as const;
}

/** The `bazaar` extension declaring the query endpoint of a listed provider. */
export function bazaarExtension(listing: BazaarListing) {
  return {
    info: {
      input: {
        type: "http" as const,
        method: "POST" as const,
        bodyType: "json" as const,
        body: {
          sql: "SELECT 1",
          params: [],
          providerId: listing.providerId,
          agentWallet: "0x0000000000000000000000000000000000000000",
        },
      },
      output: { type: "json", example: OUTPUT_EXAMPLE },
    },
    schema: infoSchema(listing.providerId),
  };
}

/** Printable ASCII, at most `max` characters: the spec's rule for `serviceName` and each tag. */
function printableAscii(text: string, max: number): string | undefined {
  const cut = text
    .replace(/[^\x20-\x7e]/g, "")
    .trim()
    .slice(0, max)
    .trim();
  return cut === "" ? undefined : cut;
}

/** The service metadata of the 402's `resource` (`serviceName`, `tags`), within the spec's limits. */
export function resourceServiceMetadata(listing: BazaarListing): { serviceName?: string; tags?: string[] } {
  const serviceName = printableAscii(listing.name, 32);
  const tags = listing.tags.map((tag) => printableAscii(tag, 32)).filter((tag) => tag !== undefined);
  return {
    ...(serviceName ? { serviceName } : {}),
    ...(tags.length > 0 ? { tags: [...new Set(tags)].slice(0, 5) } : {}),
  };
}
