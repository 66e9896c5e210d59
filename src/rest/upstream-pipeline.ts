import { performance } from "node:perf_hooks";
import pg from "pg";
import { type ResultLease, ResultMemoryFullError } from "../providers/result-memory.js";

/** pg's row builder and parameter encoder: public on the CommonJS export, absent from its type definitions. */
interface RowBuilder {
  command: string | null;
  rowCount: number | null;
  addFields(fields: unknown[]): void;
  parseRow(values: unknown[]): Record<string, unknown>;
  addCommandComplete(message: unknown): void;
  _types?: unknown;
}
const pgInternals = pg as unknown as {
  Result: new (rowMode?: string, types?: unknown) => RowBuilder;
  utils: { prepareValue(value: unknown): unknown };
};
const prepareValue = (value: unknown) => pgInternals.utils.prepareValue(value);

/** What a step of a pipeline sends and how much of its result is read. */
export interface PipelineStep {
  text: string;
  values?: readonly unknown[];
  /**
   * Read at most this many rows (the portal is left suspended beyond). Required for a step that returns rows:
   * only such a step is described, and rows without a description cannot be read.
   */
  maxRows?: number;
}

export interface StepResult {
  rows: Record<string, unknown>[];
  /** Command tag, e.g. "SELECT"; null when the step did not complete (suspended, or never ran). */
  command: string | null;
  /** The count of the command tag (rows returned or written); null when the tag has none. */
  rowCount: number | null;
  /** True when the step stopped at `maxRows` with more rows left. */
  suspended: boolean;
  /** Bytes of each row read: its DataRow payload, what the cost rule counts as result data. */
  rowBytes: number[];
  /**
   * Milliseconds from the answer of the step before (or the pipeline's sending) to this step's completion: its
   * time on the server, when the pipeline is `timed`.
   */
  ms: number;
}

/** A result whose rows passed the request's cap (PGTOLL_MAX_RESULT_BYTES): its connection is ended, unread. */
export class ResultTooLargeError extends Error {
  override name = "ResultTooLargeError";

  constructor(readonly maxBytes: number) {
    super(`the result is larger than ${maxBytes} bytes`);
  }
}

/** An error of the server, with the index of the step it answered. */
export type PipelineError = Error & { code?: string; failedStep?: number };

/**
 * Sends several statements to PostgreSQL in one write and reads their answers in one round trip: each step is
 * Parse/Bind/(Describe)/Execute of the unnamed statement and portal, and one Sync ends them all. The first
 * error makes the server skip the remaining steps (the error carries `failedStep`); inside an explicit
 * transaction the caller then sends ROLLBACK. A row-returning step reads at most `maxRows` rows, so an oversized
 * result is never buffered. Use through {@link runPipeline}.
 */
class Pipeline implements pg.Submittable {
  /** The client gives this builder its type parsers (those of the pool) before submitting. */
  readonly _result: RowBuilder = new pgInternals.Result();
  readonly results: StepResult[];
  /** Per step, made when the step describes rows. */
  readonly #builders: (RowBuilder | undefined)[] = [];
  #current = 0;
  /** performance.now() when the pipeline was sent, then when its last step completed. */
  #stepStarted = 0;
  #rowError: Error | undefined;
  #stream: { destroy(error: Error): void } | undefined;
  readonly done: Promise<StepResult[]>;
  #settle!: { resolve(results: StepResult[]): void; reject(error: PipelineError): void };

  constructor(
    private readonly steps: readonly PipelineStep[],
    private readonly timed: boolean,
    private readonly lease: ResultLease | undefined,
  ) {
    this.results = steps.map(() => ({
      rows: [],
      command: null,
      rowCount: null,
      suspended: false,
      rowBytes: [],
      ms: 0,
    }));
    this.done = new Promise((resolve, reject) => {
      this.#settle = { resolve, reject };
    });
  }

  submit(connection: pg.Connection): void {
    const con = connection as unknown as WireConnection;
    this.#stream = con.stream;
    this.#stepStarted = performance.now();
    con.stream.cork?.();
    try {
      for (const [index, step] of this.steps.entries()) {
        con.parse({ text: step.text });
        con.bind({ values: step.values as unknown[] | undefined, valueMapper: prepareValue });
        if (step.maxRows !== undefined) con.describe({ type: "P", name: "" });
        con.execute({ portal: "", rows: step.maxRows ?? 0 });
        // The server keeps its answers until Sync unless told to flush: a step's time is only seen apart from
        // the next one's when its answer leaves at once.
        if (this.timed && index < this.steps.length - 1) con.flush();
      }
      con.sync();
    } finally {
      con.stream.uncork?.();
    }
  }

  #builder(): RowBuilder {
    let builder = this.#builders[this.#current];
    if (!builder) {
      builder = new pgInternals.Result(undefined, this._result._types);
      this.#builders[this.#current] = builder;
    }
    return builder;
  }

  handleRowDescription(message: { fields: unknown[] }): void {
    this.#builder().addFields(message.fields);
  }

  handleDataRow(message: { fields: unknown[]; length: number }): void {
    if (this.#rowError) return;
    const over = this.lease?.add(message.length - 4);
    if (over) {
      // The rest of the result is not read: the connection ends (the pool replaces it), and with it the statement.
      this.#rowError =
        over === "request"
          ? new ResultTooLargeError(this.lease!.maxBytes)
          : new ResultMemoryFullError(this.lease!.processMaxBytes);
      for (const result of this.results) result.rows.length = 0;
      this.#stream?.destroy(this.#rowError);
      return;
    }
    try {
      const result = this.results[this.#current];
      result?.rows.push(this.#builder().parseRow(message.fields));
      // The message's length word counts itself: the payload is what follows it.
      result?.rowBytes.push(message.length - 4);
    } catch (error) {
      this.#rowError = error as Error;
    }
  }

  handleCommandComplete(message: unknown): void {
    // A step without rows (BEGIN, COMMIT, a write) only needs its tag read: the pipeline's own builder does it.
    const builder = this.#builders[this.#current] ?? this._result;
    builder.addCommandComplete(message);
    const result = this.results[this.#current];
    if (result) {
      result.command = builder.command;
      result.rowCount = builder.rowCount;
    }
    this.#stepDone();
  }

  handlePortalSuspended(): void {
    const result = this.results[this.#current];
    if (result) result.suspended = true;
    this.#stepDone();
  }

  #stepDone(): void {
    const now = performance.now();
    const result = this.results[this.#current];
    if (result) result.ms = now - this.#stepStarted;
    this.#stepStarted = now;
    this.#current++;
  }

  handleEmptyQuery(): void {
    this.#stepDone();
  }

  handleReadyForQuery(): void {
    if (this.#rowError) this.#settle.reject(this.#rowError);
    else this.#settle.resolve(this.results);
  }

  /** A server error (the client will still read the ReadyForQuery that follows), or the connection broke. */
  handleError(error: PipelineError): void {
    error.failedStep = this.#current;
    this.#settle.reject(error);
  }

  handleCopyInResponse(connection: pg.Connection): void {
    (connection as unknown as WireConnection).sendCopyFail("COPY FROM STDIN is not supported here");
  }

  handleCopyData(): void {}
}

/** The parts of pg's Connection a pipeline writes with (typed loosely by @types/pg). */
interface WireConnection {
  stream: { cork?(): void; uncork?(): void; destroy(error: Error): void };
  parse(options: { text: string }): void;
  bind(options: { values?: unknown[]; valueMapper(value: unknown): unknown }): void;
  describe(options: { type: "P"; name: string }): void;
  execute(options: { portal: string; rows: number }): void;
  sync(): void;
  flush(): void;
  sendCopyFail(message: string): void;
}

/**
 * Runs the steps in one round trip on `client`; rejects with a {@link PipelineError} on the first error.
 * `timed`: each step's `ms` is its own (the server sends each answer as it is done); without it the answers
 * arrive together and only the last step's time, which then includes the steps before it, is meaningful.
 * `lease`: the request's share of the process's result memory (result-memory.ts); each row's bytes are added to it
 * as the row arrives, and past the request's cap or the process's the pipeline rejects (a {@link ResultTooLargeError}
 * or a `ResultMemoryFullError`) and the client's connection is ended. Without one, rows are not counted.
 */
export function runPipeline(
  client: pg.ClientBase,
  steps: readonly PipelineStep[],
  timed = false,
  lease?: ResultLease,
): Promise<StepResult[]> {
  return client.query(new Pipeline(steps, timed, lease)).done;
}
