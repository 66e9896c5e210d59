import type { Config } from "../config.js";

/** How the management plane is set up; the server builds it from the configuration (src/config.ts). */
export interface ControlSettings {
  /** Superuser URL of the PostgreSQL cluster that hosts project databases (and their roles). */
  clusterUrl: string;
  /** Host name of the wire proxy: an endpoint's host is `<endpoint_id>.<proxyHost>`. */
  proxyHost: string;
  /** Port clients reach the proxy on; written into connection URIs unless it is 5432. */
  proxyPort: number;
  /** Whether the proxy offers TLS: connection URIs then say `sslmode=require`. */
  proxyTls: boolean;
  /** The region every project of this installation is in (`region_id`). */
  regionId: string;
  /** How long a branch copy lets the parent's open transactions finish before ending their sessions. */
  fenceGraceMs: number;
  /** How long a change waits for its operations before answering (they keep running after). Default 5000. */
  operationWaitMs?: number;
  /** Advisory logical size limit of a branch, in MiB (`branch_logical_size_limit`). Default 10240. */
  branchSizeLimitMib?: number;
  /**
   * How often the plane takes over the operations of stopped processes, retries queued drops and deletes
   * expired branches. Default 10000.
   */
  sweepIntervalMs?: number;
  /** How often the sweep samples every project's consumption counters (the consumption history). Default 300000. */
  consumptionSampleMs?: number;
}

export const DEFAULT_OPERATION_WAIT_MS = 5000;
export const DEFAULT_BRANCH_SIZE_LIMIT_MIB = 10_240;
export const DEFAULT_SWEEP_INTERVAL_MS = 10_000;
export const DEFAULT_CONSUMPTION_SAMPLE_MS = 300_000;

/** `postgres://u:p@h:5432/pgtoll` -> the same server's `postgres` database, where CREATE DATABASE runs. */
export function maintenanceUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.pathname = "/postgres";
  return url.toString();
}

/**
 * The management settings of a configuration. Projects live on PGTOLL_PROJECTS_DATABASE_URL, else on
 * `fallbackClusterUrl` (the embedded cluster, or DATABASE_URL's server). The proxy port may be set later
 * (when the proxy picked a free one).
 */
export function controlSettingsFrom(
  config: Pick<
    Config,
    "projectsDatabaseUrl" | "proxyHost" | "proxyPublicPort" | "proxyPort" | "region" | "branchFenceGraceMs"
  >,
  fallbackClusterUrl: string,
  proxyTls: boolean,
): ControlSettings {
  return {
    clusterUrl: config.projectsDatabaseUrl ?? fallbackClusterUrl,
    proxyHost: config.proxyHost,
    proxyPort: config.proxyPublicPort ?? config.proxyPort,
    proxyTls,
    regionId: config.region,
    fenceGraceMs: config.branchFenceGraceMs,
  };
}
