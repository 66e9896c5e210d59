import { describe, expect, it } from "vitest";
import { isQuotaRefusal, SessionQuota } from "./session-quota.js";

function taken(place: ReturnType<SessionQuota["take"]>): { release(): void } {
  if (isQuotaRefusal(place)) throw new Error(`refused: ${place.scope}`);
  return place;
}

describe("sessions per address and in total", () => {
  it("counts an IPv4 address and its IPv6-mapped form as one client, and an IPv6 /64 as one", () => {
    const quota = new SessionQuota({ perAddress: 1, total: 10 });
    taken(quota.take("10.1.2.3"));
    expect(quota.take("::ffff:10.1.2.3")).toEqual({ scope: "address", limit: 1 });
    taken(quota.take("10.1.2.4"));
    taken(quota.take("2001:db8:1:2::5"));
    expect(quota.take("2001:db8:1:2:ffff::9")).toEqual({ scope: "address", limit: 1 });
    taken(quota.take("2001:db8:1:3::5"));
  });

  it("gives a place back once, however often release is called", () => {
    const quota = new SessionQuota({ perAddress: 2, total: 2 });
    const first = taken(quota.take("a"));
    taken(quota.take("b"));
    expect(quota.take("c")).toEqual({ scope: "total", limit: 2 });
    first.release();
    first.release();
    expect(quota.size).toBe(1);
    taken(quota.take("c"));
    expect(quota.take("a")).toEqual({ scope: "total", limit: 2 });
  });

  it("keeps a share of the total for funded sessions, and exempts the addresses it is told to", () => {
    const quota = new SessionQuota({
      perAddress: 1,
      total: 4,
      reservedForFunded: 2,
      exempt: (a) => a === "self",
    });
    taken(quota.take("self", false));
    taken(quota.take("self", false));
    expect(quota.take("x", false)).toEqual({ scope: "unfunded", limit: 2 });
    taken(quota.take("x", true));
    taken(quota.take("self", true));
    expect(quota.take("y", true)).toEqual({ scope: "total", limit: 4 });
  });
});
