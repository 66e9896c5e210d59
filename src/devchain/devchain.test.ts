import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createPublicClient, http, parseEther } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deployTestToken,
  type LocalChain,
  localClients,
  mintTokens,
  startLocalChain,
  tokenBalance,
} from "./index.js";

/** True while `pid` runs (a zombie awaiting its reaper counts as gone). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return true;
  }
}

async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isRunning(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !isRunning(pid);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject()));
    });
  });
}

describe("startLocalChain", () => {
  let chain: LocalChain;
  beforeAll(async () => {
    chain = await startLocalChain();
  });
  afterAll(async () => {
    await chain?.stop();
  });

  it("serves chain id 8453 on 127.0.0.1 with funded accounts", async () => {
    expect(chain.chainId).toBe(8453);
    expect(chain.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const client = createPublicClient({ chain: chain.chain, transport: http(chain.rpcUrl) });
    expect(await client.getChainId()).toBe(8453);
    expect(chain.accounts).toHaveLength(10);
    expect(chain.accounts[0]?.address).toBe("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    expect(await client.getBalance({ address: chain.accounts[9]!.address })).toBeGreaterThan(
      parseEther("1000"),
    );
  });

  it("mines blocks on demand and can stop automining", async () => {
    const start = await chain.blockNumber();
    await chain.mine(3);
    expect(await chain.blockNumber()).toBe(start + 3n);

    const [sender, recipient] = chain.accounts;
    const { walletClient, publicClient } = localClients(chain, sender!.privateKey);
    await chain.setAutomine(false);
    try {
      const hash = await walletClient.sendTransaction({ to: recipient!.address, value: 1n });
      expect(await chain.blockNumber()).toBe(start + 3n);
      await chain.mine(1);
      const receipt = await publicClient.getTransactionReceipt({ hash });
      expect(receipt.blockNumber).toBe(start + 4n);
    } finally {
      await chain.setAutomine(true);
    }
  });

  it("mines on an interval when asked", async () => {
    await chain.setAutomine(false);
    try {
      const start = await chain.blockNumber();
      await chain.setIntervalMining(100);
      await new Promise((r) => setTimeout(r, 600));
      await chain.setIntervalMining(0);
      expect(await chain.blockNumber()).toBeGreaterThan(start + 1n);
    } finally {
      await chain.setAutomine(true);
    }
  });

  it("deploys a 6-decimal dev USDC and mints it", async () => {
    const [deployer, holder] = chain.accounts;
    const token = await deployTestToken(chain, deployer!.privateKey);
    const { publicClient } = localClients(chain, deployer!.privateKey);
    const read = (functionName: string) =>
      publicClient.readContract({ address: token.address, abi: token.abi, functionName });
    expect(await read("name")).toBe("USD Coin");
    expect(await read("symbol")).toBe("USDC");
    expect(await read("decimals")).toBe(6);
    await mintTokens(chain, deployer!.privateKey, token, holder!.address, 2_500_000n);
    expect(await tokenBalance(chain, token, holder!.address)).toBe(2_500_000n);
  });
});

describe("LocalChain lifecycle", () => {
  it("honours an explicit port and chain id, and stop() ends the process", async () => {
    const port = await freePort();
    const chain = await startLocalChain({ port, chainId: 31337, accountCount: 2 });
    expect(chain.rpcUrl).toBe(`http://127.0.0.1:${port}`);
    const client = createPublicClient({
      chain: chain.chain,
      transport: http(chain.rpcUrl, { retryCount: 0 }),
    });
    expect(await client.getChainId()).toBe(31337);
    expect(chain.accounts).toHaveLength(2);
    expect(isRunning(chain.pid)).toBe(true);

    await chain.stop();
    await chain.stop();
    expect(isRunning(chain.pid)).toBe(false);
    await expect(client.getChainId()).rejects.toThrow();
  });

  it("leaves no orphan when its owner process is killed", async () => {
    const entry = new URL("./index.ts", import.meta.url).href;
    const script = `const { startLocalChain } = await import(${JSON.stringify(entry)});
      const chain = await startLocalChain({ accountCount: 1 });
      console.log("PID " + chain.pid);
      setInterval(() => {}, 1000);`;
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const nodePid = await new Promise<number>((resolve, reject) => {
        let out = "";
        owner.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const match = /PID (\d+)/.exec(out);
          if (match) resolve(Number(match[1]));
        });
        owner.stderr.on("data", (chunk: Buffer) => {
          out += chunk.toString();
        });
        owner.once("exit", (code) => reject(new Error(`owner exited early (${code}): ${out}`)));
      });
      expect(isRunning(nodePid)).toBe(true);
      owner.kill("SIGKILL");
      expect(await waitUntilGone(nodePid, 10_000)).toBe(true);
    } finally {
      owner.kill("SIGKILL");
    }
  });
});
