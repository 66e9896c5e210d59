import pino from "pino";

/** How long a log line may wait before it is written: a quiet process still logs at once to a reader. */
const FLUSH_AFTER_MS = 10;
/** Lines waiting up to this many characters are written together. */
const FLUSH_AT_CHARS = 4096;

/** The part of pino's destination the buffer writes through. */
interface LineSink {
  write(data: string): boolean;
  flushSync(): void;
}

/**
 * Log lines gathered for at most `FLUSH_AFTER_MS` (or until `FLUSH_AT_CHARS` wait) and written to `sink` in one
 * write. A busy server logs a line per request; writing each alone costs a system call and a hand-off to a
 * libuv thread and back, more CPU than formatting the line.
 *
 * Warning: lines still waiting when the process is killed (SIGKILL, a crash of the runtime itself) are lost; a
 * normal exit, `process.exit` and an uncaught exception write them first.
 */
export class LogBuffer {
  readonly #sink: LineSink;
  #lines: string[] = [];
  #chars = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(sink: LineSink) {
    this.#sink = sink;
  }

  write(line: string): boolean {
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= FLUSH_AT_CHARS) this.flush();
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(this.#flushDue, FLUSH_AFTER_MS);
      this.#timer.unref();
    }
    return true;
  }

  /** Hands every waiting line to the sink (which writes it without blocking). */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#lines.length === 0) return;
    const data = this.#lines.length === 1 ? this.#lines[0]! : this.#lines.join("");
    this.#lines = [];
    this.#chars = 0;
    this.#sink.write(data);
  }

  /** Writes every waiting line before returning: for the process's last moment. */
  flushSync(): void {
    this.flush();
    this.#sink.flushSync();
  }

  readonly #flushDue = (): void => {
    this.#timer = undefined;
    this.flush();
  };
}

/** stderr through a `LogBuffer`, written out on the process's way out. */
export function bufferedStderr(): LogBuffer {
  // Not synchronous: a write goes to libuv's thread pool, and the next batch waits for it.
  const buffer = new LogBuffer(pino.destination({ dest: 2, sync: false }));
  process.once("exit", () => buffer.flushSync());
  return buffer;
}
