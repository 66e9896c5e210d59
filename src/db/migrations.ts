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
];
