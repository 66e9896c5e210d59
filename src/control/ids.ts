import { randomBytes, randomInt } from "node:crypto";

/**
 * Identifiers in the shape Neon's tooling expects: `<adjective>-<noun>-<digits>` for projects and
 * organizations, `br-…` and `ep-…` for branches and endpoints (all match `^[a-z0-9-]{1,60}$`).
 */
const ADJECTIVES = [
  "amber",
  "bold",
  "brisk",
  "calm",
  "crimson",
  "dawn",
  "dry",
  "eager",
  "fancy",
  "frosty",
  "gentle",
  "hidden",
  "icy",
  "jolly",
  "keen",
  "lively",
  "lucky",
  "misty",
  "noble",
  "odd",
  "pale",
  "patient",
  "quiet",
  "rapid",
  "royal",
  "shy",
  "silent",
  "small",
  "solitary",
  "steep",
  "sunny",
  "tiny",
  "twilight",
  "wild",
  "winter",
  "young",
];
const NOUNS = [
  "bar",
  "bird",
  "bonus",
  "breeze",
  "brook",
  "cell",
  "cloud",
  "dew",
  "dust",
  "field",
  "fire",
  "flower",
  "forest",
  "frog",
  "glade",
  "hall",
  "hill",
  "lake",
  "leaf",
  "meadow",
  "moon",
  "night",
  "pine",
  "pond",
  "rain",
  "river",
  "sea",
  "shadow",
  "smoke",
  "snow",
  "star",
  "stone",
  "sun",
  "thunder",
  "tree",
  "wave",
];

const ALPHANUMERIC = "abcdefghijklmnopqrstuvwxyz0123456789";

/** `length` characters drawn uniformly from `alphabet` with a CSPRNG (no modulo bias). */
export function randomString(length: number, alphabet = ALPHANUMERIC): string {
  let out = "";
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

function pick(words: readonly string[]): string {
  return words[randomInt(words.length)]!;
}

function digits(count: number): string {
  return randomString(count, "0123456789");
}

export const newProjectId = () => `${pick(ADJECTIVES)}-${pick(NOUNS)}-${digits(8)}`;
export const newOrganizationId = () => `org-${pick(ADJECTIVES)}-${pick(NOUNS)}-${digits(8)}`;
export const newBranchId = () => `br-${pick(ADJECTIVES)}-${pick(NOUNS)}-${randomString(8)}`;
export const newEndpointId = () => `ep-${pick(ADJECTIVES)}-${pick(NOUNS)}-${randomString(8)}`;

/** The namespace of a project's PostgreSQL roles: `p` and six characters, so role names keep 55 bytes. */
export const newRolePrefix = () => `p${randomString(6)}`;

/**
 * The real name of a branch's database on the cluster that hosts projects. Random, so that the list of databases
 * every role can read (`pg_database`) names no project, branch or database of the API.
 */
export const newPhysicalDatabaseName = () => `pgtoll_db_${randomBytes(8).toString("hex")}`;

/**
 * The real name of a project role on the cluster. Random for the same reason (`pg_roles` is readable by every
 * role): the name a project chose for a role is not seen by the other projects on the cluster.
 */
export const newPhysicalRoleName = () => `pgtoll_role_${randomBytes(8).toString("hex")}`;

/** A role password: 24 characters of [A-Za-z0-9], about 143 bits. */
export function newRolePassword(): string {
  return randomString(24, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
}

/** The identifier syntax every id of the API uses (Neon's `^[a-z0-9-]{1,60}$`). */
export const ID_PATTERN = "^[a-z0-9-]{1,60}$";
