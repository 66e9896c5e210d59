/**
 * Schema migrations, applied in order and exactly once (see migrate.ts). Never edit a released migration:
 * add a new one. The schema is plain PostgreSQL so it also runs on managed PostgreSQL-compatible engines.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: "payment gateway: providers, pricing, balances, reservations, ledger, deposits",
    sql: `
CREATE TABLE providers (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  email text NOT NULL,
  wallet_address text NOT NULL CHECK (wallet_address ~ '^0x[0-9a-f]{40}$'),
  connection_secret text NOT NULL,
  api_key_hash bytea NOT NULL,
  provisioned_by_gateway boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX providers_email_key ON providers (lower(email));
CREATE UNIQUE INDEX providers_wallet_key ON providers (wallet_address);

CREATE TABLE pricing (
  id uuid PRIMARY KEY,
  provider_id uuid NOT NULL UNIQUE REFERENCES providers (id) ON DELETE CASCADE,
  price_micro_per_1000_rows bigint NOT NULL CHECK (price_micro_per_1000_rows >= 0),
  markup_ppm bigint NOT NULL CHECK (markup_ppm > 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- available = balance_micro - reserved_micro; both CHECKs make overdraft impossible whatever the caller does.
CREATE TABLE balances (
  agent_wallet text NOT NULL CHECK (agent_wallet ~ '^0x[0-9a-f]{40}$'),
  provider_id uuid NOT NULL REFERENCES providers (id),
  balance_micro bigint NOT NULL DEFAULT 0 CHECK (balance_micro >= 0),
  reserved_micro bigint NOT NULL DEFAULT 0 CHECK (reserved_micro >= 0 AND reserved_micro <= balance_micro),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_wallet, provider_id)
);

-- A held reservation is a row; settling, voiding or expiring it deletes the row and releases reserved_micro.
CREATE TABLE reservations (
  id uuid PRIMARY KEY,
  agent_wallet text NOT NULL,
  provider_id uuid NOT NULL,
  amount_micro bigint NOT NULL CHECK (amount_micro >= 0),
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (agent_wallet, provider_id) REFERENCES balances (agent_wallet, provider_id)
);
CREATE INDEX reservations_expires_at_idx ON reservations (expires_at);

CREATE TABLE ledger_entries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_wallet text NOT NULL,
  provider_id uuid NOT NULL,
  type text NOT NULL CHECK (type IN ('deposit', 'query')),
  amount_micro bigint NOT NULL CHECK (amount_micro <> 0),
  balance_before_micro bigint NOT NULL CHECK (balance_before_micro >= 0),
  balance_after_micro bigint NOT NULL CHECK (balance_after_micro >= 0),
  tx_hash text,
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK (balance_after_micro = balance_before_micro + amount_micro),
  CHECK ((type = 'deposit') = (tx_hash IS NOT NULL)),
  CHECK ((type = 'deposit') = (amount_micro > 0)),
  FOREIGN KEY (agent_wallet, provider_id) REFERENCES balances (agent_wallet, provider_id)
);
CREATE INDEX ledger_entries_agent_idx ON ledger_entries (agent_wallet, id DESC);
CREATE INDEX ledger_entries_agent_provider_idx ON ledger_entries (agent_wallet, provider_id, id DESC);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only: % is not allowed', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_append_only();

-- The primary key is what makes a deposit creditable at most once.
CREATE TABLE deposits (
  chain_id integer NOT NULL,
  tx_hash text NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  agent_wallet text NOT NULL,
  provider_id uuid NOT NULL REFERENCES providers (id),
  amount_micro bigint NOT NULL CHECK (amount_micro > 0),
  block_number bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, tx_hash)
);
`,
  },
  {
    version: 2,
    name: "management API: users, organizations, API keys, projects, branches, endpoints, databases, roles, operations",
    sql: `
CREATE TABLE users (
  id uuid PRIMARY KEY,
  email text NOT NULL,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE organizations (
  id text PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE organization_members (
  id uuid PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('admin', 'member')),
  joined_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (org_id, user_id)
);
CREATE INDEX organization_members_user_idx ON organization_members (user_id);

-- A project belongs to exactly one user or one organization. role_prefix namespaces its PostgreSQL roles.
CREATE TABLE projects (
  id text PRIMARY KEY,
  name text NOT NULL,
  owner_user_id uuid REFERENCES users (id),
  org_id text REFERENCES organizations (id),
  region_id text NOT NULL,
  pg_version integer NOT NULL,
  role_prefix text NOT NULL UNIQUE,
  store_passwords boolean NOT NULL DEFAULT true,
  history_retention_seconds integer NOT NULL DEFAULT 0,
  settings jsonb NOT NULL DEFAULT '{}',
  default_endpoint_settings jsonb NOT NULL DEFAULT '{}',
  creation_source text NOT NULL,
  retired_active_ms double precision NOT NULL DEFAULT 0,
  retired_session_ms double precision NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((owner_user_id IS NULL) <> (org_id IS NULL))
);
CREATE INDEX projects_org_idx ON projects (org_id, created_at DESC, id DESC);
CREATE INDEX projects_owner_idx ON projects (owner_user_id, created_at DESC, id DESC);

-- Only the SHA-256 of a key is stored. project_id has no foreign key: a project-scoped key of a deleted
-- project simply stops authenticating.
CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('personal', 'organization', 'project')),
  name text NOT NULL,
  token_hash bytea NOT NULL UNIQUE,
  user_id uuid REFERENCES users (id) ON DELETE CASCADE,
  org_id text REFERENCES organizations (id) ON DELETE CASCADE,
  project_id text,
  created_by uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  last_used_at timestamptz,
  last_used_from_addr text NOT NULL DEFAULT '',
  CHECK ((kind = 'personal') = (user_id IS NOT NULL)),
  CHECK ((kind = 'personal') = (org_id IS NULL)),
  CHECK ((kind = 'project') = (project_id IS NOT NULL))
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id) WHERE kind = 'personal';
CREATE INDEX api_keys_org_idx ON api_keys (org_id) WHERE kind <> 'personal';

CREATE TABLE branches (
  id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  parent_id text REFERENCES branches (id),
  name text NOT NULL,
  is_default boolean NOT NULL DEFAULT false,
  protected boolean NOT NULL DEFAULT false,
  init_source text NOT NULL CHECK (init_source IN ('parent-data', 'schema-only')),
  current_state text NOT NULL CHECK (current_state IN ('init', 'ready', 'resetting')),
  pending_state text,
  state_changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  parent_lsn text,
  parent_timestamp timestamptz,
  last_reset_at timestamptz,
  expires_at timestamptz,
  creation_source text NOT NULL,
  created_by_name text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (project_id, name)
);
CREATE UNIQUE INDEX branches_one_default ON branches (project_id) WHERE is_default;
CREATE INDEX branches_parent_idx ON branches (parent_id);

-- physical_name: the real database on the cluster that hosts projects.
CREATE TABLE branch_databases (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  branch_id text NOT NULL REFERENCES branches (id) ON DELETE CASCADE,
  name text NOT NULL,
  owner_name text NOT NULL,
  physical_name text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (branch_id, name)
);

-- One real PostgreSQL role per (project, name); branch_roles says which branches have it.
CREATE TABLE project_roles (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  name text NOT NULL,
  physical_name text NOT NULL UNIQUE,
  password_sealed text,
  no_login boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (project_id, name)
);

CREATE TABLE branch_roles (
  branch_id text NOT NULL REFERENCES branches (id) ON DELETE CASCADE,
  project_id text NOT NULL,
  name text NOT NULL,
  protected boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (branch_id, name),
  FOREIGN KEY (project_id, name) REFERENCES project_roles (project_id, name) ON DELETE CASCADE
);

CREATE TABLE endpoints (
  id text PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  branch_id text NOT NULL REFERENCES branches (id) ON DELETE CASCADE,
  name text,
  type text NOT NULL CHECK (type IN ('read_write', 'read_only')),
  current_state text NOT NULL CHECK (current_state IN ('init', 'active', 'idle')),
  pending_state text,
  autoscaling_limit_min_cu double precision NOT NULL,
  autoscaling_limit_max_cu double precision NOT NULL,
  suspend_timeout_seconds integer NOT NULL DEFAULT 0,
  settings jsonb NOT NULL DEFAULT '{}',
  disabled boolean NOT NULL DEFAULT false,
  pooler_enabled boolean NOT NULL DEFAULT false,
  creation_source text NOT NULL,
  last_active timestamptz,
  started_at timestamptz,
  suspended_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX endpoints_one_read_write ON endpoints (branch_id) WHERE type = 'read_write';
CREATE INDEX endpoints_project_idx ON endpoints (project_id);

-- The processes that run operations. Each holds an advisory lock on its id for as long as it lives, so
-- that another process can tell that an operation's runner is gone and take the operation over.
CREATE TABLE control_instances (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE operations (
  id uuid PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  branch_id text,
  endpoint_id text,
  action text NOT NULL,
  status text NOT NULL CHECK (status IN ('scheduling', 'running', 'finished', 'failed', 'cancelled', 'skipped')),
  error text,
  failures_count integer NOT NULL DEFAULT 0,
  step jsonb NOT NULL,
  instance_id integer,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  started_at timestamptz,
  total_duration_ms integer NOT NULL DEFAULT 0
);
CREATE INDEX operations_project_idx ON operations (project_id, seq DESC);
CREATE INDEX operations_active_idx ON operations (project_id, seq) WHERE status IN ('scheduling', 'running');

-- Databases and roles to drop on the projects cluster, written in the same transaction that forgets them
-- so that a crash between the two leaves nothing behind.
CREATE TABLE physical_drops (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('database', 'role')),
  physical_name text NOT NULL,
  queued_at timestamptz NOT NULL DEFAULT now()
);
`,
  },
  {
    version: 3,
    name: "ledger: appends without a per-entry foreign-key check or an agent-only index",
    sql: `
-- Every entry is inserted by the statement that updates or creates its (agent, provider) balance row in the
-- same transaction, and balance rows are never deleted: the foreign key only re-checked that, with one
-- locking lookup of balances per appended entry (a third of an entry's cost in a charge batch).
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_agent_wallet_provider_id_fkey;

-- An agent's newest entries over all providers are read per provider from ledger_entries_agent_provider_idx
-- (listLedgerEntries); this index cost every append one more B-tree insertion.
DROP INDEX ledger_entries_agent_idx;
`,
  },
  {
    version: 4,
    name: "ledger: the agent and provider index in ascending id order",
    sql: `
-- Entries get increasing ids, so in ascending order each append goes to the right end of its (agent,
-- provider) range, where a full leaf page is split unevenly and left full. In descending order every append
-- went to the left end, where splits are 50/50: the index grew to twice the size and an append cost PostgreSQL
-- 12 us instead of 7 (100 000 appends of one agent). Newest-first reads walk the same index backwards.
CREATE INDEX ledger_entries_agent_provider_id_idx ON ledger_entries (agent_wallet, provider_id, id);
DROP INDEX ledger_entries_agent_provider_idx;
`,
  },
  {
    version: 5,
    name: "pricing: a provider can declare its data read-only for agents",
    sql: `
ALTER TABLE pricing ADD COLUMN read_only boolean NOT NULL DEFAULT false;
`,
  },
  {
    version: 6,
    name: "management: projects shared with users by email",
    sql: `
CREATE TABLE project_permissions (
  id uuid PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  granted_to_email text NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  revoked_at timestamptz
);
-- One live grant per project and address; revoked ones stay as history.
CREATE UNIQUE INDEX project_permissions_live_key ON project_permissions (project_id, lower(granted_to_email))
  WHERE revoked_at IS NULL;
CREATE INDEX project_permissions_email_idx ON project_permissions (lower(granted_to_email)) WHERE revoked_at IS NULL;
`,
  },
  {
    version: 7,
    name: "management: consumption samples of each project, for the consumption history",
    sql: `
-- Cumulative counters as sampled: a timeframe's consumption is the difference of the samples at its ends.
CREATE TABLE consumption_samples (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  sampled_at timestamptz NOT NULL,
  active_ms double precision NOT NULL,
  session_ms double precision NOT NULL,
  size_bytes double precision NOT NULL,
  PRIMARY KEY (project_id, sampled_at)
);
`,
  },
  {
    version: 8,
    name: "ledger: the amount a reservation last took, written by the same update that takes it",
    sql: `
-- A hold is computed from the balance row it updates (its latest version, whatever ran concurrently) and
-- returned through this column: computing it in a locking read before the update could use an older version.
ALTER TABLE balances ADD COLUMN last_hold_micro bigint NOT NULL DEFAULT 0;
`,
  },
  {
    version: 9,
    name: "ledger: a key per charge, so that a charge retried after a lost connection is written once",
    sql: `
ALTER TABLE ledger_entries ADD COLUMN charge_key uuid;
CREATE UNIQUE INDEX ledger_entries_charge_key ON ledger_entries (charge_key) WHERE charge_key IS NOT NULL;
`,
  },
  {
    version: 10,
    name: "x402: each payment authorization (chain, token, payer, nonce) is settled and credited at most once",
    sql: `
-- A claim is written before the authorization is settled on chain, so that a payment sent many times at once
-- (or to several pgtoll processes) is settled once. tx_hash is set once it is submitted; a claim whose
-- settlement failed before any transaction was sent is deleted, so the agent may send it again.
CREATE TABLE x402_payments (
  chain_id integer NOT NULL,
  asset text NOT NULL CHECK (asset ~ '^0x[0-9a-f]{40}$'),
  payer text NOT NULL CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  nonce text NOT NULL CHECK (nonce ~ '^0x[0-9a-f]{64}$'),
  provider_id uuid NOT NULL REFERENCES providers (id),
  amount_micro bigint NOT NULL CHECK (amount_micro > 0),
  tx_hash text CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, asset, payer, nonce)
);
`,
  },
  {
    version: 11,
    name: "pricing: limits of agents' sessions the provider sets (rows written per statement, lock and idle timeouts)",
    sql: `
ALTER TABLE pricing
  ADD COLUMN max_rows_written_per_statement integer NOT NULL DEFAULT 1000 CHECK (max_rows_written_per_statement > 0),
  ADD COLUMN lock_timeout_ms integer NOT NULL DEFAULT 5000 CHECK (lock_timeout_ms > 0),
  ADD COLUMN idle_in_transaction_timeout_ms integer NOT NULL DEFAULT 30000 CHECK (idle_in_transaction_timeout_ms > 0);
`,
  },
  {
    version: 12,
    name: "management: the upstream backends of open endpoint sessions",
    sql: `
-- Written by the wire proxy once a session's upstream backend is up, deleted when the session ends. A backend
-- is known by (pid, backend_start): a pid alone is reused by later backends, and application_name is the
-- client's to change. Whatever takes access away (suspend, delete, restore, an allowlist) ends the sessions
-- these rows name, whichever pgtoll process relays them. No foreign keys: a deleted endpoint's sessions must
-- still be found.
CREATE TABLE IF NOT EXISTS endpoint_sessions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  backend_pid integer NOT NULL,
  backend_start_us bigint NOT NULL,
  endpoint_id text NOT NULL,
  project_id text NOT NULL,
  branch_id text NOT NULL,
  physical_role text NOT NULL,
  physical_database text NOT NULL,
  client_addr text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS endpoint_sessions_endpoint_idx ON endpoint_sessions (endpoint_id);
CREATE INDEX IF NOT EXISTS endpoint_sessions_project_idx ON endpoint_sessions (project_id);
`,
  },
  {
    version: 13,
    name: "management: who created each role, and who each role's password was shown to",
    sql: `
-- A password changes generation each time it is replaced (reset, or rotated because access was taken away);
-- a disclosure counts only while the role's password is still of the generation it showed.
ALTER TABLE project_roles ADD COLUMN IF NOT EXISTS password_generation integer NOT NULL DEFAULT 0;
ALTER TABLE project_roles ADD COLUMN IF NOT EXISTS created_by_user_id uuid;
ALTER TABLE project_roles ADD COLUMN IF NOT EXISTS created_by_key_id bigint;

-- Every time a role's password left pgtoll in an answer (project or role creation, reveal_password, a reset,
-- a connection URI), the key it went to and that key's user (its owner, or for an organization or
-- project-scoped key, its creator). When such a key can no longer reach the project (revoked, its user's share
-- or membership gone, its project transferred), the password is rotated. api_key_id has no foreign key: a key
-- is never deleted while its disclosures matter, and one that is gone counts as revoked.
CREATE TABLE IF NOT EXISTS role_password_disclosures (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text NOT NULL,
  role_name text NOT NULL,
  password_generation integer NOT NULL,
  api_key_id bigint NOT NULL,
  user_id uuid NOT NULL,
  how text NOT NULL CHECK (how IN ('created', 'revealed', 'reset')),
  disclosed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  FOREIGN KEY (project_id, role_name) REFERENCES project_roles (project_id, name) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS role_password_disclosures_role_idx
  ON role_password_disclosures (project_id, role_name, password_generation);
CREATE INDEX IF NOT EXISTS role_password_disclosures_key_idx ON role_password_disclosures (api_key_id);
`,
  },
  {
    version: 14,
    name: "analytics: the ledger's charges by provider and time, and refusals counted per provider, rule and hour",
    sql: `
-- The provider analytics (src/analytics) read a provider's charges over a time range: this index finds them
-- without reading other providers' entries or deposits.
CREATE INDEX IF NOT EXISTS ledger_entries_provider_time_idx
  ON ledger_entries (provider_id, created_at) WHERE type = 'query';

-- Refused statements are counted in memory where they happen and added here periodically, one row per
-- provider, kind, rule and hour: a refusal writes nothing to the ledger. kind is 'policy' (a guard rule, or
-- invalid-sql) or 'funds' (insufficient-balance before a statement ran, balance-cut-off of a result).
CREATE TABLE IF NOT EXISTS refusal_counts (
  provider_id uuid NOT NULL,
  hour timestamptz NOT NULL,
  kind text NOT NULL CHECK (kind IN ('policy', 'funds')),
  rule text NOT NULL,
  refusals bigint NOT NULL CHECK (refusals > 0),
  PRIMARY KEY (provider_id, hour, kind, rule)
);
`,
  },
  {
    version: 15,
    name: "pricing beyond rows (minimum, per MB, per second, per table) and agents' daily limits per provider",
    sql: `
ALTER TABLE pricing
  ADD COLUMN IF NOT EXISTS minimum_micro_per_statement bigint NOT NULL DEFAULT 0
    CHECK (minimum_micro_per_statement >= 0),
  ADD COLUMN IF NOT EXISTS price_micro_per_mb bigint NOT NULL DEFAULT 0 CHECK (price_micro_per_mb >= 0),
  ADD COLUMN IF NOT EXISTS price_micro_per_second bigint NOT NULL DEFAULT 0 CHECK (price_micro_per_second >= 0),
  -- {"table" or "schema.table": micro-USDC per 1000 rows, as a decimal string}
  ADD COLUMN IF NOT EXISTS table_prices jsonb NOT NULL DEFAULT '{}'::jsonb;

-- An agent's own ceiling per provider and UTC day. What was charged on spent_day is counted by the statements that
-- charge, on the same row as the balance, so that a hold can be bounded by today's remainder in the same UPDATE
-- that bounds it by the balance.
ALTER TABLE balances
  ADD COLUMN IF NOT EXISTS daily_limit_micro bigint CHECK (daily_limit_micro >= 0),
  ADD COLUMN IF NOT EXISTS spent_day date,
  ADD COLUMN IF NOT EXISTS spent_today_micro bigint NOT NULL DEFAULT 0 CHECK (spent_today_micro >= 0);

UPDATE balances b
   SET spent_day = (now() AT TIME ZONE 'UTC')::date, spent_today_micro = s.spent
  FROM (SELECT agent_wallet, provider_id, -sum(amount_micro)::bigint AS spent
          FROM ledger_entries
         WHERE type = 'query' AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
         GROUP BY agent_wallet, provider_id) s
 WHERE b.agent_wallet = s.agent_wallet AND b.provider_id = s.provider_id;
`,
  },
  {
    version: 16,
    name: "pricing: whether statements reading a priced table may fold rows into one",
    sql: `
ALTER TABLE pricing ADD COLUMN IF NOT EXISTS allow_row_folding boolean NOT NULL DEFAULT false;
`,
  },
  {
    version: 17,
    name: "catalog: providers' listings and the tables read from their databases, searched in full text",
    sql: `
-- What a provider chooses to show agents. shown_tables NULL: every table its role can read. The search vectors
-- are written with the listing and its tables (catalog/listing-store.ts), without positions so that ranking
-- many matches stays cheap: search_names (table, schema and column names) and search_about (the name and tags)
-- tell which class a match is in, search (all of them and the descriptions) finds it under a GIN index.
CREATE TABLE IF NOT EXISTS provider_listings (
  provider_id uuid PRIMARY KEY REFERENCES providers (id) ON DELETE CASCADE,
  listed boolean NOT NULL DEFAULT false,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  tags text[] NOT NULL DEFAULT '{}',
  -- {"table" or "schema.table": {"description": text, "columns": {"column": text}}}
  table_descriptions jsonb NOT NULL DEFAULT '{}'::jsonb,
  shown_tables text[],
  -- When the tables were last read from the provider's database; the last error, kept until a read succeeds.
  refreshed_at timestamptz,
  refresh_error text,
  search tsvector NOT NULL DEFAULT ''::tsvector,
  search_names tsvector NOT NULL DEFAULT ''::tsvector,
  search_about tsvector NOT NULL DEFAULT ''::tsvector,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS provider_listings_search_idx ON provider_listings USING gin (search) WHERE listed;
CREATE INDEX IF NOT EXISTS provider_listings_tags_idx ON provider_listings USING gin (tags) WHERE listed;
CREATE INDEX IF NOT EXISTS provider_listings_refresh_idx ON provider_listings (refreshed_at) WHERE listed;

-- The tables of a listing as last read: names, column names and types, the planner's row estimate. Never a row.
CREATE TABLE IF NOT EXISTS provider_listing_tables (
  provider_id uuid NOT NULL REFERENCES provider_listings (provider_id) ON DELETE CASCADE,
  schema_name text NOT NULL,
  table_name text NOT NULL,
  kind text NOT NULL,
  approximate_rows bigint,
  columns jsonb NOT NULL DEFAULT '[]'::jsonb,
  PRIMARY KEY (provider_id, schema_name, table_name)
);
`,
  },
];
