import { describe, expect, it } from "vitest";
import { cpuSnapshot, cpuSpent, noCpu } from "../../bench/cpu-usage.js";

describe("bench CPU accounting", () => {
  it("counts a proxy's system time as part of its own, not as another process's", () => {
    const before = noCpu();
    const after = { ...noCpu(), machineBusy: 10, pgtoll: 4, proxySystem: 1.5, postgres: 3 };
    const spent = cpuSpent(before, after);
    expect(spent.proxySystem).toBe(1.5);
    expect(spent.other).toBe(3);
  });

  it("reads a live process's system time from /proc, within its total", () => {
    let spin = 0;
    const until = performance.now() + 60;
    while (performance.now() < until) spin += Math.sqrt(spin + 1);
    const snapshot = cpuSnapshot({ pgtollPid: process.pid });
    expect(snapshot.pgtoll).toBeGreaterThan(0);
    expect(snapshot.proxySystem).toBeGreaterThanOrEqual(0);
    expect(snapshot.proxySystem).toBeLessThanOrEqual(snapshot.pgtoll);
    expect(cpuSnapshot({}).proxySystem).toBe(0);
  });
});
