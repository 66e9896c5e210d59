import type { Redis } from "ioredis";

/** A fixed-window counter: how many hits a key has had in its current window, and when that window ends. */
export interface RateLimitStore {
  hit(key: string, windowMs: number): Promise<{ count: number; resetAtMs: number }>;
  close(): Promise<void>;
}

/** Counters in this process's memory: right for a single pgtoll process. */
export function createMemoryStore(now: () => number = Date.now): RateLimitStore {
  const windows = new Map<string, { count: number; resetAtMs: number }>();
  const sweeper = setInterval(() => {
    const t = now();
    for (const [key, window] of windows) if (window.resetAtMs <= t) windows.delete(key);
  }, 60_000);
  sweeper.unref();
  return {
    async hit(key, windowMs) {
      const t = now();
      let window = windows.get(key);
      if (!window || window.resetAtMs <= t) {
        window = { count: 0, resetAtMs: t + windowMs };
        windows.set(key, window);
      }
      window.count++;
      return { count: window.count, resetAtMs: window.resetAtMs };
    },
    async close() {
      clearInterval(sweeper);
      windows.clear();
    },
  };
}

// INCR and set the expiry on the first hit of a window, atomically, so every process sees one counter.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;

/** Counters in Redis, shared by every pgtoll process that uses the same `REDIS_URL`. */
export function createRedisStore(redis: Redis, prefix = "pgtoll:rl:"): RateLimitStore {
  return {
    async hit(key, windowMs) {
      const [count, ttl] = (await redis.eval(HIT_SCRIPT, 1, prefix + key, windowMs)) as [number, number];
      return { count, resetAtMs: Date.now() + ttl };
    },
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
