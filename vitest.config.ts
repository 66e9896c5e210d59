import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Most test files wait on PostgreSQL, timers and child processes rather than compute: two files at once on a
    // two-core machine (vitest's own default there is one) shortens the run without starving either.
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
