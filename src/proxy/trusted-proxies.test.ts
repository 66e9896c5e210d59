import { describe, expect, it } from "vitest";
import { addressMatcher, parseCidrList } from "./trusted-proxies.js";

describe("trusted proxy addresses", () => {
  it("reads addresses and CIDR ranges of both families", () => {
    const trusted = addressMatcher(parseCidrList(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,"));
    expect(trusted("10.200.1.1")).toBe(true);
    expect(trusted("::ffff:10.0.0.1")).toBe(true);
    expect(trusted("192.0.2.7")).toBe(true);
    expect(trusted("192.0.2.8")).toBe(false);
    expect(trusted("fd12::1")).toBe(true);
    expect(trusted("2001:db8::1")).toBe(false);
    expect(trusted(undefined)).toBe(false);
  });

  it("trusts nobody when empty", () => {
    expect(addressMatcher(parseCidrList(""))("127.0.0.1")).toBe(false);
  });

  it.each(["10.0.0.0/33", "haproxy", "10.0.0.1/8/1", "::1/129"])("refuses %s", (entry) => {
    expect(() => parseCidrList(entry)).toThrow(entry);
  });
});
