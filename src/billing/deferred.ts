/** A promise with its `resolve` at hand: one waited for by many, settled by whoever sees the awaited event. */
export interface Deferred {
  promise: Promise<void>;
  resolve(): void;
}

export function deferred(): Deferred {
  let resolve = () => {};
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
