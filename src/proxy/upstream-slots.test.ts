import { describe, expect, it } from "vitest";
import { limitedSlotKey, SlotTimeoutError, UpstreamSlots } from "./upstream-slots.js";

const settled = (promise: Promise<unknown>) =>
  Promise.race([promise.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 20))]);

describe("upstream slots with a share kept for funded sessions", () => {
  it("never gives a limited session the reserved slots, and gives them to funded ones at once", async () => {
    const slots = new UpstreamSlots(5, 200, 2);
    const free = limitedSlotKey("p");
    const held = await Promise.all([1, 2, 3].map(() => slots.acquire(free)));
    const fourth = slots.acquire(free);
    expect(await settled(fourth)).toBe(false);
    // Two slots are free, but only for sessions that pay: a funded one passes the waiting free one.
    const paying = [await slots.acquire("p"), await slots.acquire("p")];
    expect(slots.inUse("p")).toBe(5);
    await expect(fourth).rejects.toThrow(SlotTimeoutError);
    await expect(fourth).rejects.toThrow(
      /the 3 upstream sessions .* open to sessions that pay nothing are busy/,
    );
    for (const release of [...held, ...paying]) release();
    expect(slots.inUse("p")).toBe(0);
  });

  it("hands a slot given back to the first waiter that may take it, in order", async () => {
    const slots = new UpstreamSlots(2, 1000, 1);
    const free = limitedSlotKey("p");
    const first = await slots.acquire(free);
    const second = await slots.acquire("p");
    const order: string[] = [];
    const noted = (name: string) => (release: () => void) => {
      order.push(name);
      return release;
    };
    const waitingFree = slots.acquire(free).then(noted("free"));
    const waitingPaid = slots.acquire("p").then(noted("paid"));
    expect(slots.waiting("p")).toBe(2);
    // A funded slot comes back: the free waiter is first, but only one limited session may hold a slot.
    second();
    const paid = await waitingPaid;
    expect(order).toEqual(["paid"]);
    first();
    const freed = await waitingFree;
    expect(order).toEqual(["paid", "free"]);
    paid();
    freed();
    expect(slots.inUse("p")).toBe(0);
    expect(slots.waiting("p")).toBe(0);
  });

  it("keeps pools apart, and without a reserve treats limited sessions like any other", async () => {
    const slots = new UpstreamSlots(1, 50);
    const a = await slots.acquire(limitedSlotKey("a"));
    const b = await slots.acquire("b");
    await expect(slots.acquire("a")).rejects.toThrow(/all 1 upstream sessions/);
    a();
    b();
    b();
    expect(slots.inUse("b")).toBe(0);
  });
});
