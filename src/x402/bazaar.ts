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

const QUERY_BODY_SCHEMA = {
  type: "object",
  properties: {
    sql: { type: "string", description: "one or more SQL statements, $1, $2 ... for params" },
    params: {
      type: "array",
      items: { type: ["string", "number", "boolean", "null"] },
      description: "values for $1, $2 ... (a single statement only)",
    },
    providerId: { type: "string", format: "uuid", description: "the provider whose database runs the SQL" },
    agentWallet: { type: "string", description: "the paying agent's wallet, 0x and 40 hex digits" },
    maxCost: { type: "string", description: "USDC this request may cost at most" },
  },
  required: ["sql", "providerId", "agentWallet"],
} as const;

const OUTPUT_EXAMPLE = {
  rows: [{ id: 1 }],
  rowCount: 1,
  estimatedCost: "0.001000",
  actualCost: "0.001000",
  executionTime: "1.20ms",
};

/** The JSON Schema (draft 2020-12) `info` is validated against, as the spec requires for a body method. */
const INFO_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    input: {
      type: "object",
      properties: {
        type: { type: "string", const: "http" },
        method: { type: "string", enum: ["POST", "PUT", "PATCH"] },
        bodyType: { type: "string", enum: ["json", "form-data", "text"] },
        body: QUERY_BODY_SCHEMA,
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
    schema: INFO_SCHEMA,
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
