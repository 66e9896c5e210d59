import { describe, expect, it } from "vitest";
import { type DrainableSession, RESTART_MESSAGE, restartFarewell, SessionDrain } from "./session-drain.js";

function session(log: string[], name: string): DrainableSession {
  return { endWhenIdle: () => log.push(`${name} when idle`), endNow: () => log.push(`${name} now`) };
}

describe("the drain of a proxy's sessions", () => {
  it("asks open sessions to end when idle, then ends the ones left", () => {
    const drain = new SessionDrain();
    const log: string[] = [];
    const leaveA = drain.add(session(log, "a"));
    drain.add(session(log, "b"));
    expect(log).toEqual([]);
    drain.begin();
    expect(log).toEqual(["a when idle", "b when idle"]);
    leaveA();
    drain.endAll();
    expect(log).toEqual(["a when idle", "b when idle", "b now"]);
  });

  it("asks a session that opens while it drains at once", () => {
    const drain = new SessionDrain();
    const log: string[] = [];
    drain.begin();
    drain.add(session(log, "late"));
    expect(log).toEqual(["late when idle"]);
  });

  it("says when the last session has gone", async () => {
    const drain = new SessionDrain();
    await drain.whenEmpty();
    const leave = drain.add(session([], "a"));
    let empty = false;
    const waiting = drain.whenEmpty().then(() => (empty = true));
    await Promise.resolve();
    expect(empty).toBe(false);
    leave();
    await waiting;
    expect(drain.size).toBe(0);
  });

  it("ends sessions with FATAL 57P01 saying the server is restarting", () => {
    const frame = restartFarewell();
    expect(String.fromCharCode(frame[0]!)).toBe("E");
    const text = frame.toString("latin1");
    expect(text).toContain("SFATAL");
    expect(text).toContain("C57P01");
    expect(text).toContain(`M${RESTART_MESSAGE}`);
  });
});
