import { describe, expect, it } from "vitest";
import { isLoopback } from "./loopback.js";

describe("isLoopback", () => {
  it("accepts the loopback range in IPv4, IPv6 and IPv4-mapped IPv6 form", () => {
    for (const address of [
      "127.0.0.1",
      "127.8.9.10",
      "127.255.255.254",
      "::1",
      "::ffff:127.0.0.1",
      "::FFFF:127.0.0.2",
    ]) {
      expect(isLoopback(address), address).toBe(true);
    }
  });

  it("treats every other, unparsable or missing address as remote", () => {
    for (const address of [
      "192.0.2.2",
      "10.0.0.1",
      "0.0.0.0",
      "128.0.0.1",
      "::ffff:192.0.2.2",
      "fe80::1",
      "::",
      "127.0.0.1.example",
      "127.1",
      "localhost",
      "",
      undefined,
    ]) {
      expect(isLoopback(address), String(address)).toBe(false);
    }
  });
});
