import type { Abi, Hex } from "viem";
import { TEST_USDC_CONTRACT, TEST_USDC_SOURCE } from "./test-usdc-source.js";

/** ABI and creation bytecode of a compiled contract. */
export interface CompiledContract {
  abi: Abi;
  bytecode: Hex;
}

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
}

const SOURCE_FILE = "TestUSDC.sol";

let compiled: Promise<CompiledContract> | undefined;

/**
 * Compiles {@link TEST_USDC_SOURCE} with the bundled solc-js compiler (offline), once per process.
 * WARNING: needs the `solc` dev dependency.
 */
export function compileTestUsdc(): Promise<CompiledContract> {
  compiled ??= compile().catch((error: unknown) => {
    compiled = undefined;
    throw error;
  });
  return compiled;
}

async function compile(): Promise<CompiledContract> {
  let solc: { compile(input: string): string };
  try {
    solc = (await import("solc")).default;
  } catch (cause) {
    throw new Error("compiling the dev token needs the `solc` package (a dev dependency of pgtoll)", {
      cause,
    });
  }
  const input = {
    language: "Solidity",
    sources: { [SOURCE_FILE]: { content: TEST_USDC_SOURCE } },
    settings: {
      // Cancun runs on every hardfork hardhat 2.29 offers and matches what Base supports.
      evmVersion: "cancun",
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(`TestUSDC does not compile:\n${errors.map((e) => e.formattedMessage).join("\n")}`);
  }
  const contract = output.contracts?.[SOURCE_FILE]?.[TEST_USDC_CONTRACT];
  if (!contract?.evm.bytecode.object) throw new Error("solc returned no bytecode for TestUSDC");
  return { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
}
