import { SqlState } from "../db/sql-state.js";
import { errorFrame } from "./proxy-errors.js";
import { encodeCommandComplete, encodePortalSuspended } from "./serializer.js";

/**
 * Most bytes of RETURNING rows past Execute row limits one session keeps (its portals together). PostgreSQL keeps
 * them in the portal; the proxy, which runs the write whole to read its count, keeps them in memory.
 */
export const KEPT_ROWS_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The result of a write executed with a row limit. PostgreSQL runs a write's portal whole at its first Execute
 * and keeps the RETURNING rows past the limit in the portal; the proxy runs it with no limit (so that its count,
 * which the write is paid by, comes before it can commit), relays the client's limit of rows, and keeps the rest
 * here for the portal's next Executes, answering them as PostgreSQL would.
 */
export class KeptRows {
  readonly #rows: Buffer[] = [];
  #next = 0;
  #bytes = 0;
  /** The write's CommandComplete tag ("INSERT 0 5"), once it completed. */
  tag = "";

  constructor(
    /** The client's row limit of the Execute that ran the write. */
    readonly limit: number,
  ) {}

  /** Rows relayed to the client so far by the Execute that ran the write. */
  relayed = 0;

  /** Bytes kept and not yet taken. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Whether the next row of the result goes to the client (within the Execute's limit) or is kept. */
  get relaysNext(): boolean {
    return this.relayed < this.limit;
  }

  keep(frame: Buffer): void {
    this.#rows.push(Buffer.from(frame));
    this.#bytes += frame.length;
  }

  /**
   * How PostgreSQL ends the Execute that ran the write: suspended when it returned as many rows as its limit
   * (there may be more), else complete with the write's own tag.
   */
  get suspended(): boolean {
    return this.relayed === this.limit;
  }

  /**
   * The answer to a later Execute of the portal, limited to `maxRows` (0: all): the next rows, then PortalSuspended
   * when it returned `maxRows` of them, else CommandComplete counting the rows of this Execute (as PostgreSQL's
   * tag does). `done` once the portal has nothing left to give.
   */
  take(maxRows: number): { frames: Buffer[]; done: boolean } {
    const left = this.#rows.length - this.#next;
    const count = maxRows > 0 && maxRows < left ? maxRows : left;
    const frames = this.#rows.slice(this.#next, this.#next + count);
    for (let i = this.#next; i < this.#next + count; i++) {
      this.#bytes -= this.#rows[i]!.length;
      this.#rows[i] = EMPTY;
    }
    this.#next += count;
    if (maxRows > 0 && count === maxRows) {
      frames.push(encodePortalSuspended());
      return { frames, done: false };
    }
    frames.push(encodeCommandComplete(this.tag.replace(/\d+$/, String(count))));
    return { frames, done: true };
  }
}

const EMPTY = Buffer.alloc(0);

/** The error of a write whose RETURNING rows past its Execute row limit are more than the proxy keeps. */
export function keptRowsError(): Buffer {
  return errorFrame(
    SqlState.programLimitExceeded,
    `the write's RETURNING rows past the Execute row limit are more than pgtoll keeps (${KEPT_ROWS_MAX_BYTES / 1024 / 1024} MiB in a session); it was rolled back`,
    { hint: "execute the write with no row limit (0), or return fewer columns" },
  );
}
