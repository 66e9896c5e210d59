import { takeFlags } from "../command-flags.js";
import { loadConfig } from "../config.js";
import { createProviderDatabase } from "./provider-database.js";
import { devClusterUrl, runningDevStack } from "./running-dev-stack.js";

export const DEV_PROVIDER_DB_USAGE = `Usage: pgtoll dev-provider-db [--name NAME] [--data-dir DIR]

Creates a database of your own, NAME (default my_data), on the embedded PostgreSQL of the \`pgtoll dev\`
running on the data directory, with a table \`products\` (8 rows) and a role for agents, NAME_agents: it may
log in (with a generated password), connect to NAME and read \`products\`, nothing else. Prints only the
role's connection string, ready for POST /api/providers/register.
`;

/** `pgtoll dev-provider-db`: a provider database on the running dev stack's cluster. Returns its connection string. */
export async function devProviderDbCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const flags = { name: "value", help: "boolean" } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (values.help) return DEV_PROVIDER_DB_USAGE.trimEnd();
  const config = loadConfig(env, rest, Object.keys(flags));
  const name = typeof values.name === "string" ? values.name : "my_data";
  const state = await runningDevStack(config);
  const adminUrl = await devClusterUrl(
    config,
    state,
    "create the database there (docs/security.md#a-role-for-agents)",
    "postgres",
  );
  try {
    return (await createProviderDatabase(adminUrl, name)).connectionString;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ECONNREFUSED") {
      throw new Error(`the dev stack's PostgreSQL does not answer: is pgtoll dev still running?`);
    }
    throw error;
  }
}
