export { localChainDefinition } from "./chain-definition.js";
export { type CompiledContract, compileTestUsdc } from "./compile-test-usdc.js";
export { DEV_MNEMONIC, type DevAccount, deriveDevAccounts } from "./dev-accounts.js";
export { TRANSFER_WITH_AUTHORIZATION_FIELDS } from "./eip3009-types.js";
export { BASE_CHAIN_ID, type LocalChain, type LocalChainOptions, startLocalChain } from "./local-chain.js";
export {
  type ChainEndpoint,
  deployTestToken,
  localClients,
  mintTokens,
  type TestToken,
  type TokenRef,
  tokenBalance,
  transferTokens,
  transferTokensBatch,
} from "./test-token.js";
export { TEST_USDC_CONTRACT, TEST_USDC_SOURCE } from "./test-usdc-source.js";
