import { normalizeAddress } from "../billing/address.js";
import { HttpError } from "./plugins/errors.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Field checks shared by the gateway routes; each throws a 400 naming the field and what was expected. */
export function walletParam(value: unknown, field: string): `0x${string}` {
  const address = normalizeAddress(value);
  if (!address) {
    throw new HttpError(
      400,
      `invalid ${field}: expected 0x followed by 40 hex digits (mixed case must be a valid EIP-55 checksum)`,
    );
  }
  return address;
}

export function uuidParam(value: unknown, field: string): string {
  if (typeof value !== "string" || !UUID.test(value))
    throw new HttpError(400, `invalid ${field}: expected a UUID`);
  return value.toLowerCase();
}

export function txHashParam(value: unknown): `0x${string}` {
  if (typeof value !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(value)) {
    throw new HttpError(400, "invalid txHash: expected 0x followed by 64 hex digits");
  }
  return value.toLowerCase() as `0x${string}`;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function emailParam(value: string): string {
  const email = value.trim();
  if (!EMAIL.test(email) || email.length > 320)
    throw new HttpError(400, "invalid email: expected an address like name@example.com");
  return email;
}
