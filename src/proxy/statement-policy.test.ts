import { Registry } from "prom-client";
import { beforeAll, describe, expect, it } from "vitest";
import { randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { meterOver } from "../../test/support/session-meter.js";
import { SqlState } from "../db/sql-state.js";
import { checkSql, loadGuard } from "../guard/index.js";
import { decodeNoticeFields } from "./backend-messages.js";
import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import { sessionSettings } from "./in-band-settings.js";
import type { PreparedStatement } from "./prepared-statements.js";
import { createProxyMetrics } from "./proxy-metrics.js";
import { type QueryPlan, statementPolicy } from "./statement-policy.js";

const ledger = useLedgerDatabase();
beforeAll(() => loadGuard());

/** The policy of a session with the standard guard, the verdicts it tallied and the refusals it counted. */
function policyOfSession() {
  const { tally } = createProxyMetrics(new Registry());
  const refusals: string[] = [];
  const settings = sessionSettings({
    meter: meterOver(ledger, randomWallet(), 10),
    depositAddress: randomWallet(),
  });
  const policy = statementPolicy({
    check: checkSql,
    settings,
    tally,
    countRefusal: (kind, rule) => refusals.push(`${kind}/${rule}`),
  });
  return { policy, tally, refusals };
}

/** The SQLSTATE of a refusal. */
function codeOf(answer: QueryPlan | PreparedStatement | Buffer | undefined): string | undefined {
  const frame = Buffer.isBuffer(answer)
    ? answer
    : answer && "kind" in answer && answer.kind === "refused"
      ? answer.error
      : undefined;
  return frame && decodeNoticeFields(frame.subarray(FRAME_HEADER_LENGTH)).code;
}

describe("statement policy", () => {
  it("routes a query by what the guard read in it", () => {
    const { policy, tally } = policyOfSession();
    expect(policy.query("SELECT 1")).toMatchObject({ kind: "read", free: false });
    expect(policy.query("ROLLBACK")).toMatchObject({ kind: "read", free: true });
    expect(policy.query("BEGIN; UPDATE t SET a = 1 WHERE id = 2")).toMatchObject({ kind: "write" });
    expect(policy.query("show PGTOLL.BALANCE")).toEqual({ kind: "setting", name: "pgtoll.balance" });
    expect(tally.verdicts).toMatchObject({ allow: 4, deny: 0, invalid: 0 });
  });

  it("refuses what the guard denies or cannot read, counted by rule, and settings that are not", () => {
    const { policy, tally, refusals } = policyOfSession();
    expect(codeOf(policy.query("COPY items TO '/tmp/x'"))).toBe(SqlState.insufficientPrivilege);
    expect(codeOf(policy.query("SELEC 1"))).toBe(SqlState.syntaxError);
    expect(codeOf(policy.parse("SELEC 1"))).toBe(SqlState.syntaxError);
    expect(refusals).toEqual([
      expect.stringMatching(/^policy\/.+/),
      "policy/invalid-sql",
      "policy/invalid-sql",
    ]);
    expect(tally.verdicts).toMatchObject({ allow: 0, deny: 1, invalid: 2 });
    expect(codeOf(policy.query("SHOW pgtoll.nothing"))).toBe(SqlState.undefinedObject);
    expect(codeOf(policy.query("SELECT 1; SHOW pgtoll.price"))).toBe(SqlState.featureNotSupported);
    expect(refusals).toHaveLength(3);
  });

  it("keeps what an Execute needs of a Parse", () => {
    const { policy } = policyOfSession();
    const write = policy.parse("UPDATE t SET a = $1 WHERE id = 2");
    expect(write).toEqual({ sql: "UPDATE t SET a = $1 WHERE id = 2", writes: true });
    expect(policy.parse("SHOW pgtoll.price")).toEqual({
      sql: "SHOW pgtoll.price",
      writes: false,
      setting: "pgtoll.price",
    });
  });
});
