import { describe, expect, it } from "vitest";
import { walletAuthWarning } from "./wallet-auth-warning.js";

describe("the warning about wallet-only REST agent authentication", () => {
  it.each(["0.0.0.0", "::", "10.1.2.3", "pgtoll.example.com"])("is given on %s, naming signature", (host) => {
    const warning = walletAuthWarning(host, "wallet");
    expect(warning).toContain(host);
    expect(warning).toContain("PGTOLL_REST_AGENT_AUTH=signature");
  });

  it.each(["127.0.0.1", "127.0.0.2", "::1", "localhost"])("is not given on loopback (%s)", (host) => {
    expect(walletAuthWarning(host, "wallet")).toBeUndefined();
  });

  it("is not given when agents sign their requests", () => {
    expect(walletAuthWarning("0.0.0.0", "signature")).toBeUndefined();
  });
});
