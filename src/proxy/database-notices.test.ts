import { describe, expect, it } from "vitest";
import { decodeNoticeFields } from "./backend-messages.js";
import { pricedTableNotice } from "./database-notices.js";
import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import { BackendCode } from "./message-codes.js";
import { encodeErrorResponse, encodeNoticeResponse, type OutgoingNoticeFields } from "./serializer.js";

/** Every text field PostgreSQL can fill, each quoting a value of a priced table. */
const LEAKING: OutgoingNoticeFields = {
  severity: "ERROR",
  severityNonLocalized: "ERROR",
  code: "23505",
  message: 'duplicate key value "s3cr3t-1"',
  detail: "Key (secret)=(s3cr3t-2) already exists.",
  hint: "s3cr3t-3",
  position: 12,
  internalPosition: 3,
  internalQuery: "SELECT 's3cr3t-4'",
  where: 'SQL function "f" statement 1: s3cr3t-5',
  schema: "public",
  table: "secret_prices",
  column: "secret",
  dataType: "text",
  constraint: "secret_prices_s3cr3t",
  file: "nbtinsert.c",
  line: "666",
  routine: "_bt_check_unique",
};

describe("pricedTableNotice", () => {
  it.each([
    ["error", encodeErrorResponse(LEAKING), BackendCode.ErrorResponse],
    [
      "notice",
      encodeNoticeResponse({ ...LEAKING, severity: "NOTICE", severityNonLocalized: "NOTICE" }),
      BackendCode.NoticeResponse,
    ],
  ] as const)("keeps an %s's severity and SQLSTATE and none of the server's text", (kind, frame, code) => {
    const withheld = pricedTableNotice(frame, 0, frame.length);
    expect(withheld[0]).toBe(code);
    const fields = decodeNoticeFields(withheld.subarray(FRAME_HEADER_LENGTH));
    expect(Object.keys(fields).sort()).toEqual(["code", "message", "severity", "severityNonLocalized"]);
    expect(fields.code).toBe("23505");
    expect(fields.message).toMatch(/SQLSTATE 23505, integrity constraint violation.*withheld.*priced table/);
    expect(fields.message).toMatch(kind === "error" ? /refused the statement/ : /sent a notice/);
    expect(withheld.toString("latin1")).not.toMatch(/s3cr3t|secret_prices|nbtinsert/);
  });
});
