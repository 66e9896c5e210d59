import { describe, expect, it } from "vitest";
import { SessionRegistry } from "./session-registry.js";

describe("SessionRegistry", () => {
  it("tells sessions of one upstream process id apart by their secrets", () => {
    const registry = new SessionRegistry();
    const cancelled: string[] = [];
    // Two providers' backends with one pid, as two database servers may have.
    const a = registry.register(4242, () => cancelled.push("a"));
    const b = registry.register(4242, () => cancelled.push("b"));
    expect(a.processId).toBe(4242);
    expect(b.processId).toBe(4242);
    expect(a.secretKey.equals(b.secretKey)).toBe(false);

    expect(registry.cancel(4242, b.secretKey)).toBe(true);
    expect(cancelled).toEqual(["b"]);
    expect(registry.cancel(4242, a.secretKey)).toBe(true);
    expect(cancelled).toEqual(["b", "a"]);
  });

  it("cancels nothing with a wrong secret, a secret of another pid, or a secret of another length", () => {
    const registry = new SessionRegistry();
    let cancelled = 0;
    const a = registry.register(7, () => cancelled++);
    const other = registry.register(8, () => cancelled++);
    const wrong = Buffer.from(a.secretKey.map((byte) => byte ^ 0xff));
    expect(registry.cancel(7, wrong)).toBe(false);
    expect(registry.cancel(7, other.secretKey)).toBe(false);
    expect(registry.cancel(7, Buffer.concat([a.secretKey, Buffer.from([0])]))).toBe(false);
    expect(registry.cancel(9, a.secretKey)).toBe(false);
    expect(cancelled).toBe(0);
  });

  it("forgets a session once it is unregistered, and only that one", () => {
    const registry = new SessionRegistry();
    let cancelled = 0;
    const a = registry.register(5, () => cancelled++);
    const b = registry.register(5, () => cancelled++);
    a.unregister();
    a.unregister();
    expect(registry.size).toBe(1);
    expect(registry.cancel(5, a.secretKey)).toBe(false);
    expect(registry.cancel(5, b.secretKey)).toBe(true);
    expect(cancelled).toBe(1);
    b.unregister();
    expect(registry.size).toBe(0);
  });

  it("gives every session its own secret", () => {
    const registry = new SessionRegistry();
    const secrets = new Set<string>();
    for (let i = 0; i < 2000; i++) secrets.add(registry.register(1, () => {}).secretKey.toString("hex"));
    expect(secrets.size).toBe(2000);
  });
});
