import type { OutputBatch } from "./output-batch.js";

/** What the two sides of the statement pipeline ask of the relay that carries them (relay.ts). */
export interface RelayWire {
  /** Frames for each side, written at the end of the relay's pass or by a flush below. */
  readonly toClient: OutputBatch;
  readonly toUpstream: OutputBatch;
  /** Writes what is queued for the upstream now: an answer the pass waits for depends on it. */
  flushToUpstream(): void;
  flushToClient(): void;
  /** The session became idle outside a transaction with nothing upstream, at `now` (performance.now()). */
  becameIdle(now: number): void;
  /** Cancels the statement running upstream. */
  cancelUpstream(): void;
  /** Reads the upstream again if it was paused for a slow client (not while a frame waits for the ledger). */
  readUpstream(): void;
  /**
   * Holds back the client's output from here until `until` settles, writing what it resolves to first (an error
   * frame), while the upstream's answers after it are still read and metered, up to a bound.
   */
  holdClientOutput(until: Promise<Buffer | undefined>): void;
  /** How the client is done, once it is: it sent Terminate, or it is gone. */
  closing(): "terminated" | "gone" | undefined;
  ended(): boolean;
}
