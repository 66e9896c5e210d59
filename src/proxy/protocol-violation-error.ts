import { SqlState } from "../db/sql-state.js";
/**
 * A peer broke the PostgreSQL wire protocol (bad length, truncated field, unknown message type...).
 *
 * Every decoder and the framer throw only this class for bad input, so a session can catch it,
 * answer with an ErrorResponse carrying {@link ProtocolViolationError.sqlState} and close the
 * connection: after a framing error the byte stream cannot be resynchronised.
 */
export class ProtocolViolationError extends Error {
  /** SQLSTATE `protocol_violation`, as PostgreSQL reports it. */
  readonly sqlState = SqlState.protocolViolation;

  constructor(message: string) {
    super(message);
    this.name = "ProtocolViolationError";
  }
}
