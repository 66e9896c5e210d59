import { describe, expect, it } from "vitest";
import { saslprep } from "./saslprep.js";
import { md5Password, ScramError, ScramSha256Client } from "./scram-client.js";

// RFC 7677 section 3.
const vector = {
  username: "user",
  password: "pencil",
  nonce: "rOprNGfwEbeRWgbNEkqO",
  clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
  serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
  clientFinal:
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
  serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
};

const vectorClient = () =>
  new ScramSha256Client(vector.password, { username: vector.username, nonce: vector.nonce });

describe("ScramSha256Client", () => {
  it("reproduces the RFC 7677 exchange", async () => {
    const client = vectorClient();
    expect(client.clientFirstMessage).toBe(vector.clientFirst);
    expect(await client.clientFinalMessage(Buffer.from(vector.serverFirst))).toBe(vector.clientFinal);
    expect(() => client.verifyServerFinal(vector.serverFinal)).not.toThrow();
  });

  it("rejects a server that does not know the password", async () => {
    const client = vectorClient();
    await client.clientFinalMessage(vector.serverFirst);
    expect(() => client.verifyServerFinal("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")).toThrow(
      ScramError,
    );
    expect(() => client.verifyServerFinal("v=AAAA")).toThrow(ScramError);
    expect(() => client.verifyServerFinal("e=invalid-proof")).toThrow(/invalid-proof/);
  });

  it("rejects a wrong password through the server signature", async () => {
    const client = new ScramSha256Client("pencil2", { username: vector.username, nonce: vector.nonce });
    expect(await client.clientFinalMessage(vector.serverFirst)).not.toBe(vector.clientFinal);
    expect(() => client.verifyServerFinal(vector.serverFinal)).toThrow(ScramError);
  });

  it.each([
    ["a nonce not extending ours", "r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"],
    ["an identical nonce", "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"],
    ["a mandatory extension", "m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"],
    ["a bad salt", "r=rOprNGfwEbeRWgbNEkqOx,s=***,i=4096"],
    ["zero iterations", "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0"],
    ["too many iterations", "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=100000000"],
    ["a missing attribute", "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ=="],
  ])("refuses a server-first message with %s", async (_name, serverFirst) => {
    await expect(vectorClient().clientFinalMessage(serverFirst)).rejects.toThrow(ScramError);
  });

  it("enforces the message order", async () => {
    const client = vectorClient();
    expect(() => client.verifyServerFinal(vector.serverFinal)).toThrow(ScramError);
    await client.clientFinalMessage(vector.serverFirst);
    await expect(client.clientFinalMessage(vector.serverFirst)).rejects.toThrow(ScramError);
  });

  it("uses a fresh random nonce and an empty user name by default", () => {
    const a = new ScramSha256Client("x").clientFirstMessage;
    const b = new ScramSha256Client("x").clientFirstMessage;
    expect(a).toMatch(/^n,,n=,r=[A-Za-z0-9+/]{24}$/);
    expect(a).not.toBe(b);
  });

  it("escapes = and , in the user name", () => {
    expect(new ScramSha256Client("x", { username: "a=b,c", nonce: "N" }).clientFirstMessage).toBe(
      "n,,n=a=3Db=2Cc,r=N",
    );
  });
});

describe("saslprep", () => {
  it.each([
    ["user", "user"],
    ["I\u00adX", "IX"],
    ["\u00aa", "a"],
    ["\u2168", "IX"],
    ["a\u00a0b", "a b"],
    ["pass\u0007word", "pass\u0007word"],
    ["caf\u00e9", "caf\u00e9"],
    ["x\ue000", "x\ue000"],
    ["\u2168\u0080", "\u2168\u0080"],
  ])("%j → %j", (input, output) => {
    expect(saslprep(input)).toBe(output);
  });
});

describe("md5Password", () => {
  it("matches PostgreSQL's md5 scheme", () => {
    // md5("postgrespostgres") = 3175bce1...; then md5(that hex + salt 01020304).
    expect(md5Password("postgres", "postgres", Buffer.from([1, 2, 3, 4]))).toBe(
      "md568be9ed08db75f318087ab337aaea044",
    );
  });
});
