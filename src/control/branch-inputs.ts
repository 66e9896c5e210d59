import type { EndpointInput } from "./endpoint-rows.js";

/** What the branch routes accept. */
export interface BranchCreateInput {
  branch?: {
    name?: string;
    parent_id?: string;
    parent_lsn?: string;
    parent_timestamp?: string;
    protected?: boolean;
    init_source?: string;
    expires_at?: string;
  };
  endpoints?: EndpointInput[];
}

export interface BranchUpdateInput {
  name?: string;
  protected?: boolean;
  expires_at?: string | null;
}

export interface BranchRestoreInput {
  source_branch_id: string;
  source_lsn?: string;
  source_timestamp?: string;
  preserve_under_name?: string;
}
