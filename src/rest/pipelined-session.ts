import type { Duplex } from "node:stream";
import pg from "pg";
import {
  type CommandTag,
  dataRowByteLength,
  decodeAuthentication,
  decodeCommandComplete,
  decodeDataRow,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  decodeRowDescription,
  type NoticeFields,
  type TransactionStatus,
} from "../proxy/backend-messages.js";
import { type Frame, FrameReader } from "../proxy/frame-reader.js";
import { BackendCode } from "../proxy/message-codes.js";
import {
  encodeBind,
  encodeClose,
  encodeCopyFail,
  encodeDescribe,
  encodeExecute,
  encodeParse,
  encodeQuery,
  encodeStartupMessage,
  encodeSync,
  encodeTerminate,
} from "../proxy/serializer.js";

/** What a session starts up as. */
export interface SessionStartup {
  /** The agent's wallet. */
  user: string;
  /** The provider id. */
  database: string;
  /** Settings sent in the startup message (`pgtoll.synchronous_charges`, …). */
  settings?: Readonly<Record<string, string>>;
  /** How text values are read, as node-postgres's `types` option; node-postgres's own parsers by default. */
  types?: TypeParsers;
}

/** node-postgres's `types` option: the parser of a column type's text values. */
export interface TypeParsers {
  getTypeParser(oid: number, format: "text"): (text: string) => unknown;
}

/** A column of a result, and how its text values are read. */
interface ResultColumn {
  name: string;
  parse: (text: string) => unknown;
}

/** One statement's part of a query's answer. */
export interface StatementResult {
  /** The command tag's command ("SELECT", "INSERT", …). */
  command: string;
  /** The command tag's count (rows returned or written); null when the tag has none. */
  rowCount: number | null;
  /** Rows as objects by column name, values read as node-postgres reads them (its type parsers). */
  rows: Record<string, unknown>[];
  /** Bytes of the rows' values as they came (NULLs count 0). */
  rowBytes: number;
}

/** A query's whole answer, up to its ReadyForQuery. */
export interface QueryAnswer {
  /** The statements that completed, in order. */
  statements: StatementResult[];
  notices: NoticeFields[];
  /** ParameterStatus values the server reported while answering (name to value). */
  reported: Map<string, string>;
  /** The session's transaction status after the query. */
  transaction: TransactionStatus;
  /**
   * The statement an error ended after it had sent rows (a budget or the agent's funds cut it off): the rows it
   * delivered, which were paid for. Its `command` is empty and its `rowCount` null.
   */
  interrupted?: StatementResult;
}

/** The server's error for a query; `answer` holds what completed before it. */
export class QueryFailedError extends Error {
  override name = "QueryFailedError";
  readonly code: string | undefined;

  constructor(
    readonly fields: NoticeFields,
    readonly answer: QueryAnswer,
  ) {
    super(fields.message ?? "the query failed");
    this.code = fields.code;
  }
}

/**
 * A row of the answer could not be held (`QueryOptions.holdRow` refused it): the session was closed, so that no
 * more of the result is relayed and charged; `answer.interrupted` has the rows held before it.
 */
export class RowNotHeldError extends Error {
  override name = "RowNotHeldError";

  constructor(readonly answer: QueryAnswer) {
    super("a row of the answer could not be held; the session was closed");
  }
}

/** What a query may ask of its answer. */
export interface QueryOptions {
  /**
   * Called with each row's bytes before it is read: false refuses the row. The query then rejects with
   * {@link RowNotHeldError} and the session ends (its other queries reject with {@link SessionEndedError}).
   */
  holdRow?(bytes: number): boolean;
}

/** The session ended before the query's answer did. */
export class SessionEndedError extends Error {
  override name = "SessionEndedError";
}

/** A text the session keeps prepared, and the columns of its rows once described. */
interface PreparedStatement {
  name: string;
  columns: ResultColumn[] | undefined;
  /** Its ParseComplete came: a Bind of it is safe. Before, its Parse may still fail (see `query`). */
  parsed: boolean;
}

/** A query in flight: its answer as it is read. */
interface PendingQuery {
  /** The prepared statement the query runs: its columns, described once when it was parsed. */
  prepared: PreparedStatement | undefined;
  /** The query parses `prepared` and its ParseComplete has not come: a failed Parse forgets the text again. */
  parsing: boolean;
  answer: QueryAnswer;
  current: StatementResult | undefined;
  columns: ResultColumn[];
  error: NoticeFields | undefined;
  holdRow: QueryOptions["holdRow"];
  resolve(answer: QueryAnswer): void;
  reject(error: Error): void;
}

/**
 * Texts a session keeps prepared (the oldest is closed past it): a repeated query is bound and run without being
 * parsed and planned again, by the proxy's guard or by PostgreSQL.
 */
const PREPARED_STATEMENTS = 100;

/** SQLSTATE 26000: the statement a Bind names does not exist. */
const INVALID_STATEMENT_NAME = "26000";

/**
 * A client session of the wire protocol that pipelines: each query is written at once, behind those still being
 * answered, and their answers are read in order. A query with parameters (one statement) runs as a prepared
 * statement of the session's, parsed and described on its first use, then only bound and executed; one without
 * them goes as a simple Query (one or more statements). Values are sent and read as text, with node-postgres's conversions both ways, so that rows read here are the rows a
 * node-postgres client would get.
 *
 * Warning: it answers no authentication request. It is made for a connection the server opened for an agent it
 * already authenticated (`connectInProcess(agent)`); a server asking for a password fails `open`.
 */
export class PipelinedSession {
  readonly #socket: Duplex;
  readonly #reader = new FrameReader();
  readonly #pending: PendingQuery[] = [];
  #types: TypeParsers = pg.types as unknown as TypeParsers;
  #ended: Error | undefined;
  /** Messages of the queries made in this tick, written together at its end (`#send`). */
  readonly #unsent: Buffer[] = [];
  /** Query text to its prepared statement, oldest first. */
  readonly #prepared = new Map<string, PreparedStatement>();
  #preparedCount = 0;
  #idleSince = performance.now();
  /** `drained` callers, told when the last pending query is answered. */
  #drainWaiters: (() => void)[] = [];

  private constructor(socket: Duplex) {
    this.#socket = socket;
  }

  /** Starts a session on `socket` and resolves once it is ready for queries. */
  static open(socket: Duplex, startup: SessionStartup): Promise<PipelinedSession> {
    const session = new PipelinedSession(socket);
    if (startup.types) session.#types = startup.types;
    return session.#start(startup);
  }

  /** Queries written and not yet answered. */
  get pendingQueries(): number {
    return this.#pending.length;
  }

  /** When the session last had no query waiting (performance.now()): at its start, or its last answer. */
  get idleSince(): number {
    return this.#idleSince;
  }

  /** Resolves once every query written so far is answered (at once when none is waiting), or the session ended. */
  drained(): Promise<void> {
    if (this.#pending.length === 0 || this.#ended) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** Whether the session has ended (closed, or its connection broke). */
  get ended(): boolean {
    return this.#ended !== undefined;
  }

  #start(startup: SessionStartup): Promise<PipelinedSession> {
    return new Promise((resolve, reject) => {
      const failed = (error: Error) => {
        this.#end(error);
        reject(error);
      };
      const onStartupFrame = (frame: Frame) => {
        switch (frame.code) {
          case BackendCode.Authentication:
            if (decodeAuthentication(frame.payload).type !== "ok")
              throw new Error("the server asked for a password; this session answers none");
            return;
          case BackendCode.ErrorResponse: {
            const fields = decodeNoticeFields(frame.payload);
            throw new QueryFailedError(fields, emptyAnswer());
          }
          case BackendCode.ReadyForQuery:
            this.#socket.off("data", onStartupData);
            this.#socket.on("data", this.#onData);
            this.#socket.off("close", onStartupClose);
            this.#socket.on("close", () =>
              this.#end(new SessionEndedError("the session's connection closed")),
            );
            resolve(this);
            return;
          default:
            // ParameterStatus, NoticeResponse, NegotiateProtocolVersion: nothing to keep before the first query.
            return;
        }
      };
      const onStartupData = (chunk: Buffer) => {
        try {
          this.#reader.feed(chunk, onStartupFrame);
        } catch (error) {
          failed(error as Error);
        }
      };
      const onStartupClose = () =>
        failed(new SessionEndedError("the server closed the session as it started"));
      this.#socket.on("data", onStartupData);
      this.#socket.once("close", onStartupClose);
      this.#socket.on("error", () => {});
      this.#socket.write(
        encodeStartupMessage({
          user: startup.user,
          database: startup.database,
          client_encoding: "UTF8",
          ...startup.settings,
        }),
      );
    });
  }

  /**
   * Runs `sql`: with `values` (even none) as one prepared statement of the extended protocol (prepared on its
   * first use and kept), else as a simple Query. Resolves with its answer, or rejects with
   * {@link QueryFailedError}, {@link ResultTooLargeError} or {@link SessionEndedError}.
   */
  query(sql: string, values?: readonly unknown[], options: QueryOptions = {}): Promise<QueryAnswer> {
    if (this.#ended) return Promise.reject(this.#ended);
    let message: Buffer[];
    let prepared: PreparedStatement | undefined;
    let parsing = false;
    try {
      const known = values === undefined ? undefined : this.#prepared.get(sql);
      if (values === undefined) message = [encodeQuery(sql)];
      else if (known?.parsed === false) {
        // Its Parse, in a query ahead, may still fail (refused by the guard, or unfunded then), and a Bind behind
        // it would then fail as naming no statement: this run parses the text itself, unnamed, and keeps nothing.
        message = [
          encodeParse("", sql),
          encodeBind("", "", values.map(toParameter)),
          encodeDescribe("P", ""),
          encodeExecute("", 0),
          encodeSync(),
        ];
      } else {
        prepared = known ?? {
          name: `pgtoll_rest_${this.#preparedCount + 1}`,
          columns: undefined,
          parsed: false,
        };
        message = [
          encodeBind("", prepared.name, values.map(toParameter)),
          encodeExecute("", 0),
          encodeSync(),
        ];
        if (known === undefined) {
          // Described once, as it is parsed: its runs after need no RowDescription.
          message.unshift(encodeParse(prepared.name, sql), encodeDescribe("S", prepared.name));
          // Only once every message is encoded: a query that cannot be sent changes nothing.
          message.unshift(...this.#makeRoom());
          this.#preparedCount++;
          this.#prepared.set(sql, prepared);
          parsing = true;
        }
      }
    } catch (error) {
      // A NUL in the text, or a value node-postgres cannot send: nothing was written.
      return Promise.reject(error);
    }
    return new Promise((resolve, reject) => {
      this.#pending.push({
        prepared,
        parsing,
        answer: emptyAnswer(),
        current: undefined,
        columns: [],
        error: undefined,
        holdRow: options.holdRow,
        resolve,
        reject,
      });
      this.#send(message);
    });
  }

  /**
   * Queues a query's messages; those of every query made in the same tick leave in one write, so the proxy reads
   * them, and sends them upstream, as one chunk rather than one per query.
   */
  #send(messages: Buffer[]): void {
    const unsent = this.#unsent;
    for (const message of messages) unsent.push(message);
    if (unsent.length === messages.length) process.nextTick(this.#flush);
  }

  readonly #flush = (): void => {
    const unsent = this.#unsent;
    if (unsent.length === 0 || this.#ended) return;
    this.#socket.write(unsent.length === 1 ? unsent[0]! : Buffer.concat(unsent));
    unsent.length = 0;
  };

  /** Closes the oldest prepared statement when the session keeps its fill: Close messages to send first. */
  #makeRoom(): Buffer[] {
    if (this.#prepared.size < PREPARED_STATEMENTS) return [];
    const [oldest, statement] = this.#prepared.entries().next().value as [string, PreparedStatement];
    this.#prepared.delete(oldest);
    return [encodeClose("S", statement.name)];
  }

  /** Ends the session: queries not answered yet reject with {@link SessionEndedError}. */
  close(): void {
    if (this.#ended) return;
    this.#socket.end(encodeTerminate());
    this.#end(new SessionEndedError("the session was closed"));
  }

  readonly #onData = (chunk: Buffer): void => {
    try {
      this.#reader.feed(chunk, this.#onFrame);
    } catch (error) {
      this.#end(error as Error);
      this.#socket.destroy();
    }
  };

  readonly #onFrame = (frame: Frame): void => {
    const query = this.#pending[0];
    if (!query) return;
    switch (frame.code) {
      case BackendCode.RowDescription:
        query.columns = decodeRowDescription(frame.payload).map((field) => ({
          name: field.name,
          parse: this.#types.getTypeParser(field.typeOid, "text"),
        }));
        // The description of the statement the query prepares: kept for its later runs.
        if (query.prepared) query.prepared.columns = query.columns;
        query.current = { command: "", rowCount: null, rows: [], rowBytes: 0 };
        return;
      case BackendCode.DataRow:
        this.#readRow(query, frame.payload);
        return;
      case BackendCode.CommandComplete:
        this.#completeStatement(query, decodeCommandComplete(frame.payload));
        return;
      case BackendCode.ParseComplete:
        if (query.parsing && query.prepared) query.prepared.parsed = true;
        query.parsing = false;
        return;
      case BackendCode.ErrorResponse:
        query.error = decodeNoticeFields(frame.payload);
        if (query.current && query.current.rows.length > 0) query.answer.interrupted = query.current;
        query.current = undefined;
        // Its Parse failed: the text is not prepared, and the next query of it parses it again.
        if (query.parsing && query.prepared) this.#forget(query.prepared);
        // A statement of this session's was deallocated (DEALLOCATE in a query): every text is parsed again.
        if (query.error.code === INVALID_STATEMENT_NAME) this.#prepared.clear();
        return;
      case BackendCode.NoticeResponse:
        query.answer.notices.push(decodeNoticeFields(frame.payload));
        return;
      case BackendCode.ParameterStatus: {
        const { name, value } = decodeParameterStatus(frame.payload);
        query.answer.reported.set(name, value);
        return;
      }
      case BackendCode.CopyInResponse:
        this.#socket.write(encodeCopyFail("COPY FROM STDIN is not supported here"));
        return;
      case BackendCode.ReadyForQuery:
        this.#pending.shift();
        if (this.#pending.length === 0) this.#tellDrained();
        query.answer.transaction = decodeReadyForQuery(frame.payload);
        if (query.error) query.reject(new QueryFailedError(query.error, query.answer));
        else query.resolve(query.answer);
        return;
      default:
        // BindComplete, CloseComplete, ParameterDescription, NoData, EmptyQueryResponse, CopyData of COPY TO,
        // notifications.
        return;
    }
  };

  #readRow(query: PendingQuery, payload: Buffer): void {
    if (!query.current && query.prepared?.columns) {
      // A run of a statement described when it was prepared: no RowDescription came this time.
      query.columns = query.prepared.columns;
      query.current = { command: "", rowCount: null, rows: [], rowBytes: 0 };
    }
    const result = query.current;
    if (!result) return;
    const bytes = dataRowByteLength(payload);
    if (query.holdRow && !query.holdRow(bytes)) {
      if (result.rows.length > 0) query.answer.interrupted = result;
      this.#pending.shift();
      query.reject(new RowNotHeldError(query.answer));
      this.#end(new SessionEndedError("the session was closed: a row of an answer could not be held"));
      return;
    }
    const values = decodeDataRow(payload);
    const row: Record<string, unknown> = {};
    for (let i = 0; i < values.length; i++) {
      const column = query.columns[i];
      if (!column) continue;
      const value = values[i];
      const read = value === null || value === undefined ? null : column.parse(value.toString("utf8"));
      // A column named __proto__ is a property like any other, not the row's prototype.
      if (column.name === "__proto__")
        Object.defineProperty(row, column.name, { value: read, enumerable: true, writable: true });
      else row[column.name] = read;
    }
    result.rows.push(row);
    result.rowBytes += bytes;
  }

  #completeStatement(query: PendingQuery, tag: CommandTag): void {
    const result = query.current ?? { command: "", rowCount: null, rows: [], rowBytes: 0 };
    result.command = tag.command;
    result.rowCount = tag.rows;
    query.answer.statements.push(result);
    query.current = undefined;
    query.columns = [];
  }

  /** Forgets a prepared statement, unless its text was prepared again since. */
  #forget(statement: PreparedStatement): void {
    for (const [sql, prepared] of this.#prepared)
      if (prepared === statement) {
        this.#prepared.delete(sql);
        return;
      }
  }

  #tellDrained(): void {
    this.#idleSince = performance.now();
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }

  #end(error: Error): void {
    if (this.#ended) return;
    this.#ended = error;
    for (const query of this.#pending.splice(0)) query.reject(error);
    this.#tellDrained();
    this.#socket.destroy();
  }
}

function emptyAnswer(): QueryAnswer {
  return { statements: [], notices: [], reported: new Map(), transaction: "I" };
}

/** node-postgres's conversion of a parameter (arrays, dates, JSON objects, buffers) to what Bind sends. */
const prepareValue = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils
  .prepareValue;

function toParameter(value: unknown): string | Buffer | null {
  const prepared = prepareValue(value);
  if (prepared === null || prepared === undefined) return null;
  return Buffer.isBuffer(prepared) ? prepared : String(prepared);
}
