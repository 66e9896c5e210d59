import { describe, expect, it } from "vitest";
import { hashApiKeyToken, newApiKeyToken } from "./api-key-token.js";
import {
  ID_PATTERN,
  newBranchId,
  newEndpointId,
  newOrganizationId,
  newProjectId,
  newRolePassword,
  newRolePrefix,
} from "./ids.js";
import { scramVerifier } from "./scram-verifier.js";

describe("identifiers", () => {
  it("have Neon's shapes and match the API's id pattern", () => {
    const pattern = new RegExp(ID_PATTERN);
    for (let i = 0; i < 200; i++) {
      expect(newProjectId()).toMatch(/^[a-z]+-[a-z]+-\d{8}$/);
      expect(newOrganizationId()).toMatch(/^org-[a-z]+-[a-z]+-\d{8}$/);
      expect(newBranchId()).toMatch(/^br-[a-z]+-[a-z]+-[a-z0-9]{8}$/);
      expect(newEndpointId()).toMatch(/^ep-[a-z]+-[a-z]+-[a-z0-9]{8}$/);
      for (const id of [newProjectId(), newOrganizationId(), newBranchId(), newEndpointId()])
        expect(id).toMatch(pattern);
    }
  });

  it("do not repeat", () => {
    const ids = new Set(Array.from({ length: 2000 }, newBranchId));
    expect(ids.size).toBe(2000);
    expect(new Set(Array.from({ length: 2000 }, newRolePrefix)).size).toBeGreaterThan(1990);
  });

  it("make API keys of 64 characters of [a-z0-9] whose hash is what gets stored", () => {
    const token = newApiKeyToken();
    expect(token).toMatch(/^[a-z0-9]{64}$/);
    expect(hashApiKeyToken(token)).toHaveLength(32);
    expect(hashApiKeyToken(token).equals(hashApiKeyToken(newApiKeyToken()))).toBe(false);
    expect(newRolePassword()).toMatch(/^[A-Za-z0-9]{24}$/);
  });
});

describe("SCRAM verifiers", () => {
  it("match RFC 7677's test vector", () => {
    // RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations.
    const verifier = scramVerifier("pencil", Buffer.from("W22ZaJ0SNY7soEsUEjb6gQ==", "base64"), 4096);
    const [, params, keys] = verifier.split("$");
    expect(params).toBe("4096:W22ZaJ0SNY7soEsUEjb6gQ==");
    const [storedKey, serverKey] = keys!.split(":");
    expect(serverKey).toBe("wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=");
    expect(storedKey).toBe("WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=");
  });
});
