import { defineConfig } from "vitest/config";
import projectConfig from "../../vitest.config.js";

/**
 * The project's own test configuration (same global setup, same pool), pointed at the harness fixtures instead
 * of the real suites, so a test can run a deliberately failing file exactly as `npm test` would run one.
 * `PGTOLL_HARNESS_GLOBAL_FIXTURE` names an extra global setup from fixtures/ (one that fails in setup or in
 * teardown), run after the real one.
 */
const extraGlobalSetup = process.env.PGTOLL_HARNESS_GLOBAL_FIXTURE;
const projectGlobalSetup = [projectConfig.test?.globalSetup ?? []].flat();

export default defineConfig({
  ...projectConfig,
  test: {
    ...projectConfig.test,
    include: ["test/harness/fixtures/*.fixture.ts"],
    globalSetup: [
      ...projectGlobalSetup,
      ...(extraGlobalSetup ? [`test/harness/fixtures/${extraGlobalSetup}`] : []),
    ],
  },
});
