import { describe, expect, it } from "vitest";
import { BASE_USDC, ConfigError, flagName, loadConfig } from "./config.js";

describe("configuration", () => {
  it("has the documented defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: "127.0.0.1",
      httpPort: 3000,
      chainId: 8453,
      tokenAddress: BASE_USDC,
      rateLimit: true,
      rowCap: 10_000,
      statementTimeoutMs: 10_000,
      databaseUrl: undefined,
      redisUrl: undefined,
      secretKey: undefined,
      proxyMaxUnauthenticated: 1000,
      proxyMaxUnauthenticatedPerAddress: 100,
    });
    expect(config.dataDir).toMatch(/\.pgtoll$/);
  });

  it("lets flags override environment variables", () => {
    const config = loadConfig({ PGTOLL_HTTP_PORT: "4000", LOG_LEVEL: "warn" }, [
      "--http-port",
      "5000",
      "--log-level=debug",
    ]);
    expect(config.httpPort).toBe(5000);
    expect(config.logLevel).toBe("debug");
  });

  it("names the nearest known flag for a typo, the calling command's own flags among them", () => {
    expect(() => loadConfig({}, ["--htp-port", "1"])).toThrow(
      "invalid configuration: --htp-port is not a known option (did you mean --http-port?)",
    );
    expect(() => loadConfig({}, ["--amout", "1"], ["amount"])).toThrow(/did you mean --amount\?/);
    expect(() => loadConfig({}, ["--verbose"])).toThrow(/--verbose is not a known option$/);
  });

  it("reads the charge window's options from their other names too, the current name winning", () => {
    const older = loadConfig({ PGTOLL_SETTLE_INTERVAL_MS: "100", PGTOLL_SETTLE_MAX_COST: "0.5" });
    expect(older).toMatchObject({ windowIntervalMs: 100, windowMaxCostMicro: 500_000n });
    const both = loadConfig({ PGTOLL_SETTLE_INTERVAL_MS: "100", PGTOLL_WINDOW_INTERVAL_MS: "50" });
    expect(both.windowIntervalMs).toBe(50);
    expect(() => loadConfig({ PGTOLL_SETTLE_MAX_COST: "lots" })).toThrow(/PGTOLL_WINDOW_MAX_COST/);
  });

  it("derives flag names from variable names", () => {
    expect(flagName("PGTOLL_HTTP_PORT")).toBe("http-port");
    expect(flagName("DATABASE_URL")).toBe("database-url");
  });

  it.each([
    [{ PGTOLL_HTTP_PORT: "70000" }, "PGTOLL_HTTP_PORT"],
    [{ PGTOLL_CHAIN_ID: "-1" }, "PGTOLL_CHAIN_ID"],
    [{ REDIS_URL: "http://x" }, "REDIS_URL"],
    [{ PGTOLL_RPC_URL: "nope" }, "PGTOLL_RPC_URL"],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
    [{ PGTOLL_PROXY_MAX_UNAUTHENTICATED: "0" }, "PGTOLL_PROXY_MAX_UNAUTHENTICATED"],
    [{ PGTOLL_PROXY_MAX_UNAUTHENTICATED_PER_ADDRESS: "-1" }, "PGTOLL_PROXY_MAX_UNAUTHENTICATED_PER_ADDRESS"],
  ])("names the bad variable in %j", (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(variable);
  });

  it("accepts a secret key as hex or base64", () => {
    const hex = "ab".repeat(32);
    expect(loadConfig({ PGTOLL_SECRET_KEY: hex }).secretKey?.toString("hex")).toBe(hex);
    const b64 = Buffer.alloc(32, 7).toString("base64");
    expect(loadConfig({ PGTOLL_SECRET_KEY: b64 }).secretKey).toEqual(Buffer.alloc(32, 7));
  });
});
