import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions } from "pino";

type LogArgs = [unknown, ...unknown[]];
type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace";

/**
 * A request's `request.log`: the child logger bound to its request id, made the first time something logs
 * through it. Fastify makes one per request and most requests never log through it (the completed-request line
 * has its own logger), while making a pino child runs the redaction over its bindings.
 */
class LazyRequestLogger implements FastifyBaseLogger {
  #made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get #logger(): FastifyBaseLogger {
    this.#made ??= this.parent.child(this.bindings, this.options);
    return this.#made;
  }

  get level(): string {
    return this.#made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.#logger.level = level;
  }

  #log(level: LogLevel, args: LogArgs): void {
    const logger = this.#logger;
    (logger[level] as (...args: LogArgs) => void).apply(logger, args);
  }

  fatal(...args: LogArgs): void {
    this.#log("fatal", args);
  }

  error(...args: LogArgs): void {
    this.#log("error", args);
  }

  warn(...args: LogArgs): void {
    this.#log("warn", args);
  }

  info(...args: LogArgs): void {
    this.#log("info", args);
  }

  debug(...args: LogArgs): void {
    this.#log("debug", args);
  }

  trace(...args: LogArgs): void {
    this.#log("trace", args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory` for {@link LazyRequestLogger}. */
export function lazyRequestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options);
}
