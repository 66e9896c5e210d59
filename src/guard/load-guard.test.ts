import { describe, expect, it } from "vitest";
import { checkSql, loadGuard } from "./index.js";

describe("loadGuard", () => {
  it("is required before checkSql, and idempotent", async () => {
    expect(() => checkSql("SELECT 1")).toThrow(/loadGuard/);
    await Promise.all([loadGuard(), loadGuard()]);
    await loadGuard();
    expect(checkSql("SELECT 1").kind).toBe("allow");
  });
});
