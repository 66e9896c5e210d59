import { randomUUID } from "node:crypto";
import pg from "pg";
import { type Price, type PriceSettings, priceOf } from "../billing/cost.js";
import type { Queryable } from "../billing/ledger.js";
import { type AgentLimits, DEFAULT_AGENT_LIMITS } from "../billing/pricing.js";
import { SqlState } from "../db/sql-state.js";
import { generateApiKey } from "./api-key.js";
import { providerSocket } from "./checked-connect.js";
import { allowedAddress, type ProviderHostPolicy, ProviderHostRefused } from "./provider-hosts.js";
import { checkProviderRole, type ProviderRoleCheck } from "./provider-role.js";
import type { SecretBox } from "./secret-box.js";

export interface Provider {
  id: string;
  name: string;
  email: string;
  walletAddress: string;
  provisionedByGateway: boolean;
  createdAt: Date;
}

export interface ProviderWithSecrets extends Provider {
  connectionSecret: string;
  apiKeyHash: Buffer;
}

export interface PricingRecord extends PriceSettings, AgentLimits {
  id: string;
  providerId: string;
  /** What the cost rule charges at these settings, computed once per record. */
  price: Price;
  /** Agent sessions run with default_transaction_read_only=on: PostgreSQL refuses their writes. */
  readOnly: boolean;
  /**
   * Statements that read a priced table may fold many rows into one (string_agg, array_agg, scalar subqueries...;
   * guard/row-folding.ts). False: the guard refuses them (rule `priced-table-folding`).
   */
  allowRowFolding: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export class DuplicateProviderError extends Error {
  override name = "DuplicateProviderError";
}

export class UpstreamConnectionError extends Error {
  override name = "UpstreamConnectionError";
}

/**
 * Checks that a connection string is a PostgreSQL URL pgtoll may and can connect to: its host is resolved once
 * and every address checked against `policy` (provider-hosts.ts), then pgtoll connects to the checked address
 * and reads the role's rights (the caller decides whether they are acceptable). Throws
 * {@link UpstreamConnectionError} with the reason; the message never contains the password.
 *
 * Registration is open to anyone, so what it answers must not make pgtoll a port scanner: a host that cannot
 * be resolved or reached, a closed port, a timeout and a server that does not speak PostgreSQL all get one
 * message. Only a PostgreSQL server's own refusal (wrong password, unknown database, pg_hba) is passed on.
 */
export async function verifyConnectionString(
  connectionString: string,
  policy: ProviderHostPolicy,
  timeoutMs = 5000,
): Promise<ProviderRoleCheck> {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new UpstreamConnectionError(
      "connectionString must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname",
    );
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new UpstreamConnectionError(
      `connectionString must start with postgres:// or postgresql://, not ${url.protocol}//`,
    );
  }
  if (!url.hostname) throw new UpstreamConnectionError("connectionString must name a host");
  const where = `${url.hostname}:${url.port || 5432}`;
  const unreachable = new UpstreamConnectionError(
    `could not connect to a PostgreSQL server at ${where} (check the host, the port and that it accepts connections from pgtoll)`,
  );
  let target: { address: string };
  try {
    target = await allowedAddress(policy, url.hostname);
  } catch (error) {
    if (error instanceof ProviderHostRefused) throw new UpstreamConnectionError(error.message);
    throw unreachable;
  }
  const client = new pg.Client({
    connectionString,
    stream: providerSocket(target),
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return await checkProviderRole(client);
  } catch (error) {
    if (!(error instanceof pg.DatabaseError)) throw unreachable;
    const reason = error.message.replaceAll(url.password || "\u0000", "***");
    throw new UpstreamConnectionError(`the PostgreSQL server at ${where} refused the connection: ${reason}`);
  } finally {
    await client.end().catch(() => {});
  }
}

const PROVIDER_COLUMNS =
  "id, name, email, wallet_address, provisioned_by_gateway, created_at, connection_secret, api_key_hash";

interface ProviderRow {
  id: string;
  name: string;
  email: string;
  wallet_address: string;
  provisioned_by_gateway: boolean;
  created_at: Date;
  connection_secret: string;
  api_key_hash: Buffer;
}

function toProvider(row: ProviderRow): ProviderWithSecrets {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    walletAddress: row.wallet_address,
    provisionedByGateway: row.provisioned_by_gateway,
    createdAt: row.created_at,
    connectionSecret: row.connection_secret,
    apiKeyHash: row.api_key_hash,
  };
}

/**
 * Stores a provider whose connection string was already verified: the connection string sealed, the API key
 * hashed. Returns the provider and its API key, which is never retrievable again.
 * Throws {@link DuplicateProviderError} when the email (case-insensitive) or wallet is already registered.
 */
export async function registerProvider(
  db: Queryable,
  box: SecretBox,
  input: {
    name: string;
    email: string;
    walletAddress: string;
    connectionString: string;
    provisionedByGateway?: boolean;
  },
): Promise<{ provider: Provider; apiKey: string }> {
  const { key, hash } = generateApiKey();
  try {
    const { rows } = await db.query<ProviderRow>(
      `INSERT INTO providers (id, name, email, wallet_address, connection_secret, api_key_hash, provisioned_by_gateway)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${PROVIDER_COLUMNS}`,
      [
        randomUUID(),
        input.name,
        input.email,
        input.walletAddress,
        box.seal(input.connectionString),
        hash,
        input.provisionedByGateway ?? false,
      ],
    );
    const { connectionSecret: _secret, apiKeyHash: _hash, ...provider } = toProvider(rows[0]!);
    return { provider, apiKey: key };
  } catch (error) {
    const pgError = error as { code?: string; constraint?: string };
    if (pgError.code === SqlState.uniqueViolation) {
      const field = pgError.constraint === "providers_wallet_key" ? "walletAddress" : "email";
      throw new DuplicateProviderError(`a provider with this ${field} is already registered`);
    }
    throw error;
  }
}

export async function findProvider(db: Queryable, id: string): Promise<ProviderWithSecrets | null> {
  const { rows } = await db.query<ProviderRow>(`SELECT ${PROVIDER_COLUMNS} FROM providers WHERE id = $1`, [
    id,
  ]);
  return rows[0] ? toProvider(rows[0]) : null;
}

interface PricingRow {
  id: string;
  provider_id: string;
  price_micro_per_1000_rows: bigint;
  markup_ppm: bigint;
  read_only: boolean;
  allow_row_folding: boolean;
  max_rows_written_per_statement: number;
  lock_timeout_ms: number;
  idle_in_transaction_timeout_ms: number;
  minimum_micro_per_statement: bigint;
  price_micro_per_mb: bigint;
  price_micro_per_second: bigint;
  /** Table name to micro-USDC per 1000 rows, as decimal text. */
  table_prices: Record<string, string>;
  created_at: Date;
  updated_at: Date;
}

function toPricing(row: PricingRow): PricingRecord {
  const settings: PriceSettings = {
    priceMicroPer1000Rows: row.price_micro_per_1000_rows,
    markupPpm: row.markup_ppm,
    minimumMicroPerStatement: row.minimum_micro_per_statement,
    priceMicroPerMB: row.price_micro_per_mb,
    priceMicroPerSecond: row.price_micro_per_second,
    tablePricesMicroPer1000Rows: new Map(
      Object.entries(row.table_prices).map(([name, micro]) => [name, BigInt(micro)]),
    ),
  };
  return {
    id: row.id,
    providerId: row.provider_id,
    ...settings,
    price: priceOf(settings),
    readOnly: row.read_only,
    allowRowFolding: row.allow_row_folding,
    maxRowsWrittenPerStatement: row.max_rows_written_per_statement,
    lockTimeoutMs: row.lock_timeout_ms,
    idleInTransactionTimeoutMs: row.idle_in_transaction_timeout_ms,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * How many times this process changed pricing in a metadata database (`setPricing`). Caches of pricing
 * (provider-cache.ts) remember the count they read under and treat their entries as stale once it moved, so a
 * price set through this process's API is in force for the very next query.
 */
const pricingChanges = new WeakMap<Queryable, number>();

export function pricingChangeCount(db: Queryable): number {
  return pricingChanges.get(db) ?? 0;
}

/** What a pricing request may set beside the price; each one absent keeps its stored value (or its default). */
export interface PricingSettings extends Partial<AgentLimits> {
  readOnly?: boolean;
  allowRowFolding?: boolean;
}

/**
 * Sets or replaces a provider's pricing; the record keeps its id and createdAt across updates. A setting left
 * undefined keeps the stored value (its default for a new record).
 */
export async function setPricing(
  db: Queryable,
  providerId: string,
  price: PriceSettings,
  settings: PricingSettings = {},
): Promise<PricingRecord> {
  // Counted before and after: a cache filled while the statement runs can hold either price, so it must not last.
  pricingChanges.set(db, pricingChangeCount(db) + 1);
  const { rows } = await db
    .query<PricingRow>(
      `INSERT INTO pricing AS p (id, provider_id, price_micro_per_1000_rows, markup_ppm, read_only,
                                 max_rows_written_per_statement, lock_timeout_ms, idle_in_transaction_timeout_ms,
                                 minimum_micro_per_statement, price_micro_per_mb, price_micro_per_second, table_prices,
                                 allow_row_folding)
     VALUES ($1, $2, $3, $4, coalesce($5, false), coalesce($6, ${DEFAULT_AGENT_LIMITS.maxRowsWrittenPerStatement}),
             coalesce($7, ${DEFAULT_AGENT_LIMITS.lockTimeoutMs}), coalesce($8, ${DEFAULT_AGENT_LIMITS.idleInTransactionTimeoutMs}),
             coalesce($9, 0), coalesce($10, 0), coalesce($11, 0), coalesce($12::jsonb, '{}'), coalesce($13, false))
     ON CONFLICT (provider_id) DO UPDATE
       SET price_micro_per_1000_rows = excluded.price_micro_per_1000_rows, markup_ppm = excluded.markup_ppm,
           read_only = coalesce($5, p.read_only),
           max_rows_written_per_statement = coalesce($6, p.max_rows_written_per_statement),
           lock_timeout_ms = coalesce($7, p.lock_timeout_ms),
           idle_in_transaction_timeout_ms = coalesce($8, p.idle_in_transaction_timeout_ms),
           minimum_micro_per_statement = coalesce($9, p.minimum_micro_per_statement),
           price_micro_per_mb = coalesce($10, p.price_micro_per_mb),
           price_micro_per_second = coalesce($11, p.price_micro_per_second),
           table_prices = coalesce($12::jsonb, p.table_prices),
           allow_row_folding = coalesce($13, p.allow_row_folding), updated_at = now()
     RETURNING *`,
      [
        randomUUID(),
        providerId,
        price.priceMicroPer1000Rows,
        price.markupPpm,
        settings.readOnly ?? null,
        settings.maxRowsWrittenPerStatement ?? null,
        settings.lockTimeoutMs ?? null,
        settings.idleInTransactionTimeoutMs ?? null,
        price.minimumMicroPerStatement ?? null,
        price.priceMicroPerMB ?? null,
        price.priceMicroPerSecond ?? null,
        price.tablePricesMicroPer1000Rows
          ? Object.fromEntries(
              [...price.tablePricesMicroPer1000Rows].map(([name, micro]) => [name, `${micro}`]),
            )
          : null,
        settings.allowRowFolding ?? null,
      ],
    )
    .finally(() => pricingChanges.set(db, pricingChangeCount(db) + 1));
  return toPricing(rows[0]!);
}

export async function findPricing(db: Queryable, providerId: string): Promise<PricingRecord | null> {
  const { rows } = await db.query<PricingRow>("SELECT * FROM pricing WHERE provider_id = $1", [providerId]);
  return rows[0] ? toPricing(rows[0]) : null;
}

/** A provider and its pricing in one round trip, as the query path needs them. */
export async function findProviderForQuery(
  db: Queryable,
  id: string,
): Promise<{ provider: ProviderWithSecrets; pricing: PricingRecord | null } | null> {
  const { rows } = await db.query<ProviderRow & { pricing: PricingRow | null }>(
    `SELECT p.id, p.name, p.email, p.wallet_address, p.provisioned_by_gateway, p.created_at, p.connection_secret,
            p.api_key_hash,
            CASE WHEN pr.id IS NULL THEN NULL ELSE json_build_object(
              'id', pr.id, 'provider_id', pr.provider_id,
              'price_micro_per_1000_rows', pr.price_micro_per_1000_rows::text, 'markup_ppm', pr.markup_ppm::text,
              'read_only', pr.read_only, 'allow_row_folding', pr.allow_row_folding, 'max_rows_written_per_statement', pr.max_rows_written_per_statement,
              'lock_timeout_ms', pr.lock_timeout_ms, 'idle_in_transaction_timeout_ms', pr.idle_in_transaction_timeout_ms,
              'minimum_micro_per_statement', pr.minimum_micro_per_statement::text,
              'price_micro_per_mb', pr.price_micro_per_mb::text,
              'price_micro_per_second', pr.price_micro_per_second::text, 'table_prices', pr.table_prices,
              'created_at', pr.created_at, 'updated_at', pr.updated_at) END AS pricing
       FROM providers p LEFT JOIN pricing pr ON pr.provider_id = p.id WHERE p.id = $1`,
    [id],
  );
  const row = rows[0];
  if (!row) return null;
  const pricing = row.pricing
    ? toPricing({
        ...row.pricing,
        price_micro_per_1000_rows: BigInt(row.pricing.price_micro_per_1000_rows as unknown as string),
        markup_ppm: BigInt(row.pricing.markup_ppm as unknown as string),
        minimum_micro_per_statement: BigInt(row.pricing.minimum_micro_per_statement as unknown as string),
        price_micro_per_mb: BigInt(row.pricing.price_micro_per_mb as unknown as string),
        price_micro_per_second: BigInt(row.pricing.price_micro_per_second as unknown as string),
        created_at: new Date(row.pricing.created_at as unknown as string),
        updated_at: new Date(row.pricing.updated_at as unknown as string),
      })
    : null;
  return { provider: toProvider(row), pricing };
}
