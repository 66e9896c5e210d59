/** The analytics API's answers, as the console reads them (docs/analytics.md). */
export interface Compared<T> {
  current: T;
  previous: T;
  change: number | null;
}

export interface Summary {
  from: string;
  to: string;
  revenue: Compared<string>;
  statements: Compared<number>;
  rows: Compared<number>;
  activeAgents: Compared<number>;
  averageCostPerStatement: Compared<string>;
}

export interface Earnings {
  granularity: "hour" | "day";
  buckets: { start: string; revenue: string; statements: number; rows: number; agents: number }[];
}

export interface AgentRow {
  wallet: string;
  spent: string;
  statements: number;
  rows: number;
  balance: string;
  lastActive: string | null;
}

export interface Agents {
  agents: AgentRow[];
  nextCursor: string | null;
}

export interface Statements {
  statements: {
    fingerprint: string;
    normalized: string;
    sample: string;
    calls: number;
    rows: number;
    revenue: string;
  }[];
  otherShapes: { calls: number; rows: number; revenue: string };
}

export interface Refusals {
  total: number;
  byRule: { rule: string; refusals: number }[];
  byFunds: { reason: string; refusals: number }[];
}

export interface Pricing {
  basePricePer1000Rows: number;
  markupMultiplier: number;
  readOnly: boolean;
  maxRowsWrittenPerStatement: number;
  lockTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  minimumCostPerStatement: number;
  pricePerMB: number;
  pricePerSecond: number;
  tablePrices: Record<string, number>;
  allowRowFolding: boolean;
  updatedAt: string;
}

export interface ProviderAccount {
  providerId: string;
  name: string;
  email: string;
  walletAddress: string;
  createdAt: string;
}

export interface DatabaseCheck {
  reachable: boolean;
  latencyMs: number | null;
  error: string | null;
  checkedAt: string;
}

export interface TableNotes {
  description?: string;
  columns?: Record<string, string>;
}

export interface Listing {
  providerId: string;
  listed: boolean;
  name: string;
  description: string;
  tags: string[];
  tableDescriptions: Record<string, TableNotes>;
  shownTables: string[] | null;
  refreshedAt: string | null;
  refreshError: string | null;
  tables: {
    schema: string;
    name: string;
    kind: string;
    approximateRows: number | null;
    description: string;
    columns: { name: string; type: string; description: string }[];
  }[];
}
