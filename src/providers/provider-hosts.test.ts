import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../config.js";
import {
  allowedAddress,
  isAllowedAddress,
  PUBLIC_PROVIDER_HOSTS,
  parseProviderHosts,
} from "./provider-hosts.js";

describe("PGTOLL_PROVIDER_HOSTS", () => {
  it("public: addresses outside loopback, private, shared, link-local, documentation, multicast and reserved ranges", () => {
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"])
      expect(isAllowedAddress(PUBLIC_PROVIDER_HOSTS, address), address).toBe(true);
    for (const address of [
      "0.0.0.0",
      "127.0.0.1",
      "127.9.9.9",
      "10.0.0.1",
      "100.64.0.1",
      "169.254.169.254",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "198.18.0.1",
      "224.0.0.1",
      "255.255.255.255",
      "::",
      "::1",
      "::ffff:127.0.0.1",
      "::ffff:10.0.0.1",
      "fd12::1",
      "fe80::1",
      "ff02::1",
      "2002:7f00:1::1",
      "64:ff9b::7f00:1",
    ])
      expect(isAllowedAddress(PUBLIC_PROVIDER_HOSTS, address), address).toBe(false);
  });

  it("reads networks, addresses and host names, and says which entry it cannot read", async () => {
    const policy = parseProviderHosts(" 10.0.0.0/8, ::1 ,DB.Internal., 192.168.1.20");
    expect(isAllowedAddress(policy, "10.200.0.1")).toBe(true);
    expect(isAllowedAddress(policy, "::1")).toBe(true);
    expect(isAllowedAddress(policy, "192.168.1.20")).toBe(true);
    expect(isAllowedAddress(policy, "192.168.1.21")).toBe(false);
    expect(isAllowedAddress(policy, "8.8.8.8")).toBe(false); // no `public`
    // a listed name is allowed whatever it resolves to
    const named = { ...policy, resolve: async () => [{ address: "172.20.0.5", family: 4 }] };
    expect(await allowedAddress(named, "db.internal")).toEqual({ address: "172.20.0.5", family: 4 });
    await expect(allowedAddress(named, "other.internal")).rejects.toThrow(
      /the host other.internal resolves to 172.20.0.5, not an address/,
    );
    for (const [raw, message] of [
      ["", /lists no host or network/],
      ["10.0.0.0/33", /"10.0.0.0\/33" is not a network/],
      ["10.0.0/8", /is not a network/],
      ["db internal", /"db internal" is not "any", "public", a network, an address or a host name/],
    ] as const)
      expect(() => parseProviderHosts(raw), raw).toThrow(message);
    expect(() => loadConfig({ PGTOLL_PROVIDER_HOSTS: "10.0.0.0/99" })).toThrow(ConfigError);
    expect(() => loadConfig({ PGTOLL_PROVIDER_HOSTS: "10.0.0.0/99" })).toThrow(/PGTOLL_PROVIDER_HOSTS/);
    expect(loadConfig({}).providerHosts).toBeUndefined();
  });

  it("refuses a name when any of its addresses is refused", async () => {
    const policy = {
      ...PUBLIC_PROVIDER_HOSTS,
      resolve: async () => [
        { address: "8.8.8.8", family: 4 },
        { address: "127.0.0.1", family: 4 },
      ],
    };
    await expect(allowedAddress(policy, "mixed.example")).rejects.toThrow(/resolves to 127.0.0.1/);
  });
});
