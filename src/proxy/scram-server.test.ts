import { createHash, createHmac, pbkdf2Sync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SCRAM_SHA_256, ScramSha256Client } from "./scram-client.js";
import { SCRAM_SHA_256_PLUS, ScramProtocolError, ScramServer } from "./scram-server.js";

const binding = createHash("sha256").update("a certificate").digest();

/** A SCRAM-SHA-256-PLUS client, computed by hand from RFC 5802 (our client does not bind channels). */
function plusClientFinal(serverFirst: string, clientFirst: string, password: string, cbind: Buffer): string {
  const attrs = Object.fromEntries(serverFirst.split(",").map((f) => [f[0], f.slice(2)]));
  const salted = pbkdf2Sync(password, Buffer.from(attrs.s!, "base64"), Number(attrs.i), 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const gs2 = "p=tls-server-end-point,,";
  const withoutProof = `c=${Buffer.concat([Buffer.from(gs2), cbind]).toString("base64")},r=${attrs.r}`;
  const authMessage = `${clientFirst.slice(gs2.length)},${serverFirst},${withoutProof}`;
  const signature = createHmac("sha256", storedKey).update(authMessage).digest();
  const proof = Buffer.from(clientKey.map((byte, i) => byte ^ signature[i]!));
  return `${withoutProof},p=${proof.toString("base64")}`;
}

describe("ScramServer", () => {
  it("authenticates a SCRAM-SHA-256 client with the right password, and the client verifies the server", async () => {
    const server = new ScramServer({ password: "pencil", channelBinding: null });
    expect(server.mechanisms).toEqual([SCRAM_SHA_256]);
    const client = new ScramSha256Client("pencil");
    const serverFirst = await server.serverFirstMessage(SCRAM_SHA_256, client.clientFirstMessage);
    const serverFinal = server.verifyClientFinal(await client.clientFinalMessage(serverFirst));
    expect(serverFinal).toMatch(/^v=/);
    expect(() => client.verifyServerFinal(serverFinal!)).not.toThrow();
  });

  it("fails a wrong password, and a role without one, the same way", async () => {
    for (const password of ["pencil", null]) {
      const server = new ScramServer({ password, channelBinding: null });
      const client = new ScramSha256Client("not the password");
      const serverFirst = await server.serverFirstMessage(SCRAM_SHA_256, client.clientFirstMessage);
      expect(server.verifyClientFinal(await client.clientFinalMessage(serverFirst))).toBeNull();
    }
  });

  it("binds the channel with SCRAM-SHA-256-PLUS and refuses a client bound to another certificate", async () => {
    const clientFirst = "p=tls-server-end-point,,n=,r=abcdefghijklmnop";
    const server = new ScramServer({ password: "pencil", channelBinding: binding });
    expect(server.mechanisms).toEqual([SCRAM_SHA_256_PLUS, SCRAM_SHA_256]);
    const serverFirst = await server.serverFirstMessage(SCRAM_SHA_256_PLUS, clientFirst);
    expect(server.verifyClientFinal(plusClientFinal(serverFirst, clientFirst, "pencil", binding))).toMatch(
      /^v=/,
    );

    const other = new ScramServer({ password: "pencil", channelBinding: binding });
    const otherFirst = await other.serverFirstMessage(SCRAM_SHA_256_PLUS, clientFirst);
    const elsewhere = createHash("sha256").update("a man in the middle's certificate").digest();
    expect(() =>
      other.verifyClientFinal(plusClientFinal(otherFirst, clientFirst, "pencil", elsewhere)),
    ).toThrow(/channel binding check failed/);
  });

  it("refuses a downgrade ('y' while the server binds channels) and malformed messages", async () => {
    const server = new ScramServer({ password: "pencil", channelBinding: binding });
    await expect(server.serverFirstMessage(SCRAM_SHA_256, "y,,n=,r=abc")).rejects.toThrow(/negotiation/);
    await expect(server.serverFirstMessage(SCRAM_SHA_256, "n,,r=abc")).rejects.toThrow(ScramProtocolError);
    await expect(server.serverFirstMessage("SCRAM-SHA-1", "n,,n=,r=abc")).rejects.toThrow(/not offered/);
    const plain = new ScramServer({ password: "pencil", channelBinding: null });
    await expect(plain.serverFirstMessage(SCRAM_SHA_256, "p=tls-server-end-point,,n=,r=abc")).rejects.toThrow(
      ScramProtocolError,
    );
    await plain.serverFirstMessage(SCRAM_SHA_256, "n,,n=,r=abc");
    expect(() => plain.verifyClientFinal("c=biws,r=wrong-nonce,p=AAAA")).toThrow(/nonce/);
    expect(() => plain.verifyClientFinal("garbage")).toThrow(/malformed/);
  });
});
