import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions } from "pino";

type LogArgs = [unknown, ...unknown[]];

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

  fatal(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.fatal as (...args: LogArgs) => void).apply(logger, args);
  }

  error(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.error as (...args: LogArgs) => void).apply(logger, args);
  }

  warn(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.warn as (...args: LogArgs) => void).apply(logger, args);
  }

  info(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.info as (...args: LogArgs) => void).apply(logger, args);
  }

  debug(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.debug as (...args: LogArgs) => void).apply(logger, args);
  }

  trace(...args: LogArgs): void {
    const logger = this.#logger;
    (logger.trace as (...args: LogArgs) => void).apply(logger, args);
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
