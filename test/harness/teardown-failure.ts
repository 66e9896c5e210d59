/**
 * Vitest logs an error thrown by a global teardown ("error during close") and still exits 0. A teardown that
 * could not stop its database or remove its files has failed the run, so it sets a failing exit code itself.
 */
export function failRunOnTeardownError(teardown: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await teardown();
    } catch (error) {
      process.exitCode = 1;
      throw error;
    }
  };
}
