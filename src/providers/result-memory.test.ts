import { describe, expect, it } from "vitest";
import { ResultMemory } from "./result-memory.js";

describe("ResultMemory", () => {
  it("lets requests hold rows together up to the process's limit, each up to its own cap", () => {
    const memory = new ResultMemory(1000);
    const first = memory.lease(600);
    const second = memory.lease(600);
    expect(first.add(500)).toBeUndefined();
    // The request's own cap is checked first: nothing is taken from the process for it.
    expect(first.add(200)).toBe("request");
    expect(second.add(400)).toBeUndefined();
    expect(second.add(200)).toBe("process");
    expect(memory.heldBytes).toBe(900);
    first.release();
    expect(memory.heldBytes).toBe(400);
    expect(second.add(200)).toBeUndefined();
    second.release();
    second.release();
    expect(memory.heldBytes).toBe(0);
  });
});
