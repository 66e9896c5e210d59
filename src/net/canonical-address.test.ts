import { describe, expect, it } from "vitest";
import { canonicalAddress } from "./canonical-address.js";

describe("canonicalAddress", () => {
  it.each([
    "::ffff:1.2.3.4",
    "::FFFF:1.2.3.4",
    "::ffff:102:304",
    "::ffff:0102:0304",
    "0:0:0:0:0:ffff:102:304",
    "0000:0000:0000:0000:0000:FFFF:0102:0304",
    "0:0:0:0:0:ffff:1.2.3.4",
    "0::ffff:1.2.3.4",
  ])("reads the IPv4-mapped %s as 1.2.3.4", (spelling) => {
    expect(canonicalAddress(spelling)).toBe("1.2.3.4");
  });

  it("reads mapped loopback and the edges of the IPv4 range", () => {
    expect(canonicalAddress("::ffff:7f00:1")).toBe("127.0.0.1");
    expect(canonicalAddress("::ffff:0:0")).toBe("0.0.0.0");
    expect(canonicalAddress("::ffff:ffff:ffff")).toBe("255.255.255.255");
  });

  it("leaves IPv4 as it is and writes other IPv6 addresses in their shortest lower-case form", () => {
    expect(canonicalAddress("203.0.113.7")).toBe("203.0.113.7");
    expect(canonicalAddress("2001:DB8:0:0:0:0:0:1")).toBe("2001:db8::1");
    expect(canonicalAddress("::1")).toBe("::1");
    expect(canonicalAddress("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(canonicalAddress("fe80::1%eth0")).toBe("fe80::1%eth0");
  });

  it("does not take look-alikes of a mapped address for IPv4", () => {
    // ::ffff:1 is 0:0:0:0:0:0:ffff:1; ::1.2.3.4 (IPv4-compatible) and ::ffff:0:1.2.3.4 (translated) are not mapped.
    expect(canonicalAddress("::ffff:1")).toBe("::ffff:1");
    expect(canonicalAddress("::1.2.3.4")).toBe("::102:304");
    expect(canonicalAddress("::ffff:0:1.2.3.4")).toBe("::ffff:0:102:304");
    expect(canonicalAddress("1::ffff:102:304")).toBe("1::ffff:102:304");
  });

  it("returns what is not an address unchanged", () => {
    expect(canonicalAddress(undefined)).toBeUndefined();
    expect(canonicalAddress("unknown")).toBe("unknown");
    expect(canonicalAddress("")).toBe("");
  });
});
