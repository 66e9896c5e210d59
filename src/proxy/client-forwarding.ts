import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { GuardedStatement } from "../guard/index.js";
import type { AnswerQueue } from "./answer-queue.js";
import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import {
  decodeBindTarget,
  decodeClose,
  decodeExecute,
  decodeParse,
  decodeQuery,
} from "./frontend-messages.js";
import {
  localShowAnswer,
  type SessionSettings,
  standInParse,
  standInQuery,
  unreadableSetting,
} from "./in-band-settings.js";
import { refusedParse, refusedQuery } from "./injected-errors.js";
import { KeptRows } from "./kept-rows.js";
import { FrontendCode } from "./message-codes.js";
import type { OutputBatch } from "./output-batch.js";
import { type PreparedStatement, PreparedStatements } from "./prepared-statements.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";
import type { RelayWire } from "./relay-wire.js";
import { encodeCommandComplete, encodeExecute, encodeReadyForQuery } from "./serializer.js";
import type { StatementMetering } from "./statement-metering.js";
import type { StatementPolicy } from "./statement-policy.js";
import { BEGIN_QUERY, FLUSH } from "./write-transactions.js";

export interface ClientForwardingOptions {
  queue: AnswerQueue;
  policy: StatementPolicy;
  metering: StatementMetering;
  settings: SessionSettings;
  logger: Logger;
  wire: RelayWire;
  /** Told when a statement of the client's is sent upstream (its time on the database starts). */
  statementSent?: () => void;
}

/**
 * The client's side of the statement pipeline: each client message is forwarded upstream (once funded, when it
 * makes the database parse, plan or run SQL), refused (an unparsable stand-in takes its place upstream, so that
 * PostgreSQL's own semantics follow), or, for `SHOW pgtoll.*`, answered by the proxy. A query that writes is
 * sent so that its writes commit only once paid for: the client's next frames wait until they are. Each message
 * with answers of its own is queued for the upstream's side (upstream-answers.ts). What a statement may do is the
 * policy's to say (statement-policy.ts), and whether it is funded the metering's (statement-metering.ts).
 */
export class ClientForwarding {
  readonly #prepared = new PreparedStatements();
  readonly #queue: AnswerQueue;
  readonly #policy: StatementPolicy;
  readonly #metering: StatementMetering;
  readonly #settings: SessionSettings;
  readonly #logger: Logger;
  readonly #wire: RelayWire;
  readonly #toClient: OutputBatch;
  readonly #toUpstream: OutputBatch;
  readonly #statementSent: (() => void) | undefined;

  constructor(options: ClientForwardingOptions) {
    this.#queue = options.queue;
    this.#policy = options.policy;
    this.#metering = options.metering;
    this.#settings = options.settings;
    this.#logger = options.logger;
    this.#wire = options.wire;
    this.#toClient = options.wire.toClient;
    this.#toUpstream = options.wire.toUpstream;
    this.#statementSent = options.statementSent;
  }

  /**
   * Handles one client frame, `buffer[start, end)` (Terminate is the relay's); returns a promise when it has to
   * wait (for the ledger, or for a write to be paid for).
   */
  handle(code: number, buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    switch (code) {
      case FrontendCode.Query:
        return this.#onQuery(buffer, start, end);
      case FrontendCode.Parse: {
        const { name, sql } = decodeParse(payloadOf(buffer, start, end));
        const statement = this.#policy.parse(sql);
        if (Buffer.isBuffer(statement)) {
          this.#prepared.parsed(name, undefined);
          return void this.#refuse(statement, false);
        }
        this.#prepared.parsed(name, statement);
        // A setting's stand-in is prepared under the client's statement name.
        if (statement.setting !== undefined)
          return void this.#toUpstream.push(standInParse(name, statement.setting));
        // The server parses and analyses it: nothing reaches the provider's database unfunded.
        return this.#forwardFunded(buffer, start, end);
      }
      case FrontendCode.Bind: {
        const bind = decodeBindTarget(payloadOf(buffer, start, end));
        this.#prepared.bound(bind.portal, bind.statement);
        this.#queue.forgetPortal(bind.portal);
        // Binding plans the statement (and may evaluate its functions): funded first too.
        return this.#forwardFunded(buffer, start, end);
      }
      case FrontendCode.Execute:
        return this.#onExecute(buffer, start, end);
      case FrontendCode.Sync:
        this.#queue.push({ kind: "sync" });
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      case FrontendCode.Close: {
        const target = decodeClose(payloadOf(buffer, start, end));
        this.#prepared.closed(target.kind, target.name);
        if (target.kind === "P") this.#queue.forgetPortal(target.name);
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      }
      case FrontendCode.FunctionCall:
        this.#refuse(this.#policy.functionCallRefusal, true);
        return;
      case FrontendCode.Describe:
      case FrontendCode.Flush:
      case FrontendCode.CopyData:
      case FrontendCode.CopyDone:
      case FrontendCode.CopyFail:
        // No SQL in them, and no data back: the upstream judges them.
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      default:
        // As PostgreSQL does; nothing unknown reaches the provider's database.
        throw new ProtocolViolationError(`invalid frontend message type ${code}`);
    }
  }

  #onQuery(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const plan = this.#policy.query(decodeQuery(payloadOf(buffer, start, end)).sql);
    if (plan.kind === "refused") return void this.#refuse(plan.error, true);
    if (plan.kind === "setting") return this.#querySetting(plan.name);
    if (plan.kind === "set")
      return this.#changeSetting(plan.name, plan.value, plan.command, plan.statementCount);
    const { statements } = plan;
    if (plan.kind === "write") return this.#onWriteQuery(statements, buffer, start, end);
    const funding = plan.free ? undefined : this.#metering.startStatement();
    if (!funding) return void this.#sendQuery(statements, false, false, buffer, start, end);
    return funding.then((refusal) => {
      if (refusal) this.#refuse(refusal, true);
      else this.#sendQuery(statements, false, false, buffer, start, end);
    });
  }

  /**
   * A simple query that writes. It waits until everything before it is answered (whether a transaction is open
   * decides how it runs: write-transactions.ts), is funded, and is sent; the client's next frames then wait until
   * its writes are paid for, or undone.
   */
  async #onWriteQuery(
    statements: readonly GuardedStatement[],
    buffer: Buffer,
    start: number,
    end: number,
  ): Promise<void> {
    if (!this.#queue.empty) await this.#queue.drained();
    if (this.#wire.ended() || this.#wire.closing()) return;
    const plan = this.#policy.writePlan(statements, this.#queue.status);
    if (typeof plan === "object") return this.#refuse(plan.refusal, true);
    const funding = this.#metering.startStatement();
    const refusal = funding && (await funding);
    if (refusal) return this.#refuse(refusal, true);
    if (plan === "wrap") {
      this.#queue.push({ kind: "injected", role: "begin" });
      this.#toUpstream.push(BEGIN_QUERY);
    }
    this.#sendQuery(statements, true, plan === "wrap", buffer, start, end);
    return this.#awaitWrite();
  }

  // No closure on the per-statement path: each would cost an allocation (and, under tsx, a name).
  #sendQuery(
    statements: readonly GuardedStatement[],
    writes: boolean,
    wrapped: boolean,
    buffer: Buffer,
    start: number,
    end: number,
  ): void {
    this.#queue.push({
      kind: "simple",
      statements,
      index: 0,
      started: performance.now(),
      writes,
      wrapped,
      failed: false,
    });
    this.#toUpstream.pushRange(buffer, start, end);
    this.#statementSent?.();
  }

  #onExecute(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const { portal, maxRows } = decodeExecute(payloadOf(buffer, start, end));
    const prepared = this.#prepared.portal(portal);
    if (prepared?.setting !== undefined) {
      this.#queue.push({ kind: "setting", name: prepared.setting });
      this.#toUpstream.pushRange(buffer, start, end);
      return;
    }
    const kept = this.#queue.keptPortals.get(portal);
    if (kept) {
      // Its rows were paid for with its write; the upstream's portal is exhausted and answers with no row.
      this.#queue.push({ kind: "kept", portal, maxRows, rows: kept });
      this.#toUpstream.pushRange(buffer, start, end);
      return;
    }
    const funding = this.#metering.startStatement();
    if (!funding) return this.#sendExecute(prepared, portal, maxRows, buffer, start, end);
    return funding.then((refused) =>
      refused
        ? this.#refuse(refused, false)
        : this.#sendExecute(prepared, portal, maxRows, buffer, start, end),
    );
  }

  /**
   * Sends an Execute; one of a write is followed by a Flush (its answers come only then) and waited for. A write
   * with a row limit is sent with none, as PostgreSQL runs a write whole at its first Execute: its count, which
   * it is paid by, then comes before its transaction can commit (kept-rows.ts).
   */
  #sendExecute(
    prepared: PreparedStatement | undefined,
    portal: string,
    maxRows: number,
    buffer: Buffer,
    start: number,
    end: number,
  ): Promise<void> | undefined {
    const writes = prepared?.writes === true;
    const kept = writes && maxRows > 0 ? new KeptRows(maxRows) : undefined;
    this.#queue.push({
      kind: "execute",
      sql: prepared?.sql ?? "",
      started: performance.now(),
      writes,
      portal,
      continued: this.#queue.suspendedPortals.has(portal),
      kept,
    });
    if (kept) this.#toUpstream.push(encodeExecute(portal, 0));
    else this.#toUpstream.pushRange(buffer, start, end);
    this.#statementSent?.();
    if (!writes) return;
    this.#toUpstream.push(FLUSH);
    return this.#awaitWrite();
  }

  /** Sends what is queued and holds the client's next frames until the last unit queued (a write) is done. */
  #awaitWrite(): Promise<void> {
    this.#wire.flushToUpstream();
    return this.#queue.answeredLast();
  }

  /** Forwards a client frame once it is funded: nothing reaches the provider's database unfunded. */
  #forwardFunded(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const funding = this.#metering.startStatement();
    if (!funding) return void this.#toUpstream.pushRange(buffer, start, end);
    return funding.then((refusal) => {
      if (refusal) this.#refuse(refusal, false);
      else this.#toUpstream.pushRange(buffer, start, end);
    });
  }

  /**
   * A simple-protocol `SHOW pgtoll.<name>`: answered by the proxy alone when nothing is upstream (the usual
   * case), else sent as its stand-in so that the answer keeps its place in the pipeline.
   */
  #querySetting(name: string): Promise<void> | undefined {
    if (!this.#queue.empty) {
      this.#queue.push({ kind: "setting", name });
      this.#queue.push({ kind: "sync" });
      this.#toUpstream.push(standInQuery(name));
      return;
    }
    return this.#settings.value(name).then(
      (value) => {
        this.#toClient.push(localShowAnswer(name, value, this.#queue.status));
        this.#wire.flushToClient();
        if (this.#queue.status === "I") this.#wire.becameIdle(performance.now());
      },
      (error: unknown) => {
        this.#toClient.push(unreadableSetting(this.#logger, error));
        this.#toClient.push(encodeReadyForQuery(this.#queue.status));
        this.#wire.flushToClient();
      },
    );
  }

  /**
   * A simple-protocol `SET` or `RESET` of `pgtoll.<name>`: applied by the proxy once everything before it is
   * answered (it must not change how an earlier statement is charged), and answered as PostgreSQL answers a SET.
   */
  async #changeSetting(
    name: string,
    value: string | null,
    command: string,
    statementCount: number,
  ): Promise<void> {
    if (!this.#queue.empty) await this.#queue.drained();
    if (this.#wire.ended() || this.#wire.closing()) return;
    const refusal = this.#settings.change(name, value, statementCount);
    if (refusal) this.#toClient.push(refusal);
    else this.#toClient.push(encodeCommandComplete(command));
    this.#toClient.push(encodeReadyForQuery(this.#queue.status));
    this.#wire.flushToClient();
    if (this.#queue.status === "I") this.#wire.becameIdle(performance.now());
  }

  /** Sends the upstream an unparsable stand-in and remembers to show the client `error` in its place. */
  #refuse(error: Buffer, simple: boolean): void {
    this.#queue.push({ kind: "refused", error });
    if (simple) this.#queue.push({ kind: "sync" });
    this.#toUpstream.push(simple ? refusedQuery : refusedParse);
  }
}

/** The body of the frame `buffer[start, end)`, after its type byte and length word. */
function payloadOf(buffer: Buffer, start: number, end: number): Buffer {
  return buffer.subarray(start + FRAME_HEADER_LENGTH, end);
}
