import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { CONSOLE_DIR } from "../../src/rest/routes/console.js";

/**
 * Builds the console bundle when it is missing (`npm ci` builds it through `prepare`; a checkout tested without
 * it gets it here), so that the console's tests never run against an absent page.
 */
export async function ensureConsoleBuilt(): Promise<void> {
  if (existsSync(`${CONSOLE_DIR}console.js`) && existsSync(`${CONSOLE_DIR}index.html`)) return;
  await promisify(execFile)(process.execPath, [
    new URL("../../scripts/build-console.mjs", import.meta.url).pathname,
  ]);
}
