/**
 * A refusal of the management plane, with the HTTP status and the error code the v2 API answers with
 * (`{code, message}`, as Neon's API does). Thrown by src/control, mapped to a response by src/rest/v2.
 */
export class ControlError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ControlError";
  }
}

export const badRequest = (message: string) => new ControlError(400, "BAD_REQUEST", message);
export const unauthorized = (message: string) => new ControlError(401, "UNAUTHORIZED", message);
export const forbidden = (message: string) => new ControlError(403, "FORBIDDEN", message);
/** Also the answer for a resource the caller cannot see: a key never learns whether it exists. */
export const notFound = (message: string) => new ControlError(404, "NOT_FOUND", message);
export const conflict = (message: string) => new ControlError(409, "CONFLICT", message);
export const preconditionFailed = (message: string) => new ControlError(412, "PRECONDITION_FAILED", message);
/** The project has operations still scheduled or running (Neon answers 423 too). */
export const locked = (message: string) => new ControlError(423, "LOCKED", message);
