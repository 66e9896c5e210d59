import { describe, expect, it } from "vitest";
import { addressAllowed, allowlistOf, checkAllowedIps } from "./ip-allowlist.js";

const list = (ips: string[], protectedBranchesOnly = false) => ({ ips, protectedBranchesOnly });

describe("the IP allowlist", () => {
  it.each([
    ["203.0.113.5", ["203.0.113.5"], true],
    ["203.0.113.6", ["203.0.113.5"], false],
    ["::ffff:203.0.113.5", ["203.0.113.5"], true],
    ["::ffff:cb00:7105", ["203.0.113.5"], true],
    ["0:0:0:0:0:FFFF:CB00:71C8", ["203.0.113.0/24"], true],
    ["::ffff:cb00:7106", ["203.0.113.5"], false],
    ["203.0.113.5", ["::ffff:cb00:7105"], true],
    ["203.0.113.200", ["203.0.113.0/24"], true],
    ["203.0.114.1", ["203.0.113.0/24"], false],
    ["203.0.113.7", ["203.0.113.5-203.0.113.9"], true],
    ["203.0.113.10", ["203.0.113.5-203.0.113.9"], false],
    ["2001:db8::1", ["2001:db8::/32"], true],
    ["2001:db9::1", ["2001:db8::/32"], false],
    ["2001:db8::5", ["2001:db8::1-2001:db8::9"], true],
    ["2001:db8::5", ["203.0.113.0/24"], false],
    ["127.0.0.1", ["10.0.0.0/8", "127.0.0.1"], true],
    ["not an address", ["0.0.0.0/0"], false],
  ])("%s against %j: %s", (address, ips, allowed) => {
    expect(addressAllowed(list(ips), false, address)).toBe(allowed);
  });

  it("restricts only protected branches with protected_branches_only", () => {
    expect(addressAllowed(list(["203.0.113.5"], true), false, "198.51.100.1")).toBe(true);
    expect(addressAllowed(list(["203.0.113.5"], true), true, "198.51.100.1")).toBe(false);
  });

  it("restricts nothing when absent or empty", () => {
    expect(allowlistOf({})).toBeNull();
    expect(allowlistOf({ allowed_ips: { ips: [] } })).toBeNull();
    expect(allowlistOf({ allowed_ips: { ips: ["1.2.3.4"], protected_branches_only: true } })).toEqual(
      list(["1.2.3.4"], true),
    );
  });

  it("refuses entries that are no address or range, naming them", () => {
    expect(() =>
      checkAllowedIps({ allowed_ips: { ips: ["1.2.3.4", "10.0.0.0/8", "::1", "1.1.1.1-1.1.1.9"] } }),
    ).not.toThrow();
    for (const bad of ["1.2.3", "10.0.0.0/33", "1.1.1.9-1.1.1.1", "1.1.1.1-::1", "example.com"])
      expect(() => checkAllowedIps({ allowed_ips: { ips: [bad] } })).toThrow(
        new RegExp(bad.replace(/[.]/g, "\\.")),
      );
  });
});
