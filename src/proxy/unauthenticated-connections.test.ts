import { describe, expect, it } from "vitest";
import { addressKey, UnauthenticatedConnections } from "./unauthenticated-connections.js";

describe("UnauthenticatedConnections", () => {
  it("refuses an address at its cap and admits it again once one of its connections is done", () => {
    const counted = new UnauthenticatedConnections({ total: 100, perAddress: 2 });
    const first = counted.admit("203.0.113.7", () => {});
    expect(counted.admit("203.0.113.7", () => {})).not.toBeNull();
    expect(counted.admit("203.0.113.7", () => {})).toBeNull();
    expect(counted.admit("::ffff:203.0.113.7", () => {})).toBeNull();
    expect(counted.admit("203.0.113.8", () => {})).not.toBeNull();
    first!();
    first!(); // a second call changes nothing
    expect(counted.admit("203.0.113.7", () => {})).not.toBeNull();
    expect(counted.admit("203.0.113.7", () => {})).toBeNull();
    expect(counted.size).toBe(3);
  });

  it("counts an IPv6 /64 as one address", () => {
    const counted = new UnauthenticatedConnections({ total: 100, perAddress: 1 });
    expect(counted.admit("2001:db8:1:2::1", () => {})).not.toBeNull();
    expect(counted.admit("2001:db8:1:2:ffff::9", () => {})).toBeNull();
    expect(counted.admit("2001:db8:1:3::1", () => {})).not.toBeNull();
  });

  it("never caps loopback, and caps nothing per address with 0", () => {
    const capped = new UnauthenticatedConnections({ total: 100, perAddress: 1 });
    for (const address of ["127.0.0.1", "127.0.0.1", "::1", "::ffff:127.0.0.2"])
      expect(capped.admit(address, () => {})).not.toBeNull();
    const uncapped = new UnauthenticatedConnections({ total: 100, perAddress: 0 });
    for (let i = 0; i < 50; i++) expect(uncapped.admit("203.0.113.7", () => {})).not.toBeNull();
  });

  it("closes the connection that has waited longest when the total is reached", () => {
    const counted = new UnauthenticatedConnections({ total: 3, perAddress: 0 });
    const evicted: number[] = [];
    const done = [0, 1, 2].map((i) => counted.admit("127.0.0.1", () => evicted.push(i))!);
    done[0]!(); // authenticated: no longer counted, never evicted
    counted.admit("127.0.0.1", () => evicted.push(3));
    expect(evicted).toEqual([]);
    counted.admit("127.0.0.1", () => evicted.push(4));
    counted.admit("127.0.0.1", () => evicted.push(5));
    expect(evicted).toEqual([1, 2]);
    expect(counted.size).toBe(3);
    done[1]!(); // an evicted connection's own close changes nothing
    expect(counted.size).toBe(3);
  });

  it("frees an evicted connection's place in its address's count", () => {
    const counted = new UnauthenticatedConnections({ total: 1, perAddress: 1 });
    counted.admit("203.0.113.7", () => {});
    expect(counted.admit("203.0.113.8", () => {})).not.toBeNull();
    expect(counted.admit("203.0.113.7", () => {})).not.toBeNull();
  });
});

describe("addressKey", () => {
  it.each([
    ["203.0.113.7", "203.0.113.7"],
    ["::ffff:203.0.113.7", "203.0.113.7"],
    // A dual-stack balancer's PROXY v2 header spells IPv4 clients in hex: not one /64 for all of them.
    ["::ffff:cb00:7107", "203.0.113.7"],
    ["0:0:0:0:0:FFFF:CB00:7108", "203.0.113.8"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:0DB8:0001:0002::", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["1:2::3:4:5:1.2.3.4", "1:2:0:3::/64"],
    [undefined, "unknown"],
  ])("keys %s as %s", (address, key) => {
    expect(addressKey(address)).toBe(key);
  });
});
