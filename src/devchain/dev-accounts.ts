import { pbkdf2Sync } from "node:crypto";
import type { Address, Hex } from "viem";
import { toHex } from "viem";
import { HDKey, hdKeyToAccount } from "viem/accounts";

/**
 * Hardhat's well-known default mnemonic. Every key derived from it is public knowledge:
 * WARNING: never send real funds to these accounts on a real network.
 */
export const DEV_MNEMONIC = "test test test test test test test test test test test junk";

/** A funded account of the local chain. */
export interface DevAccount {
  address: Address;
  privateKey: Hex;
}

/** Derives the first `count` accounts of `mnemonic` on the standard path m/44'/60'/0'/0/i. */
export function deriveDevAccounts(count: number, mnemonic: string = DEV_MNEMONIC): DevAccount[] {
  // BIP-39 seed is PBKDF2-HMAC-SHA512(mnemonic, "mnemonic", 2048); the native one is much faster
  // than deriving the seed again in JS for every account.
  const seed = pbkdf2Sync(mnemonic.normalize("NFKD"), "mnemonic", 2048, 64, "sha512");
  const root = HDKey.fromMasterSeed(seed);
  const accounts: DevAccount[] = [];
  for (let i = 0; i < count; i++) {
    const account = hdKeyToAccount(root, { addressIndex: i });
    const privateKey = account.getHdKey().privateKey;
    if (!privateKey) throw new Error(`no private key derived for account ${i}`);
    accounts.push({ address: account.address, privateKey: toHex(privateKey) });
  }
  return accounts;
}
