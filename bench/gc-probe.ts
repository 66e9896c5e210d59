/**
 * Preloaded (`--expose-gc --import ./bench/gc-probe.ts`) into the pgtoll process of the idle-session
 * measurement: on SIGUSR2 it runs full garbage collections and prints what memory is left, so a before/after
 * RSS delta does not depend on when V8 last happened to collect.
 */
process.on("SIGUSR2", () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const { rss, heapUsed, external } = process.memoryUsage();
  process.stdout.write(`gc-probe ${rss} ${heapUsed} ${external}\n`);
});
