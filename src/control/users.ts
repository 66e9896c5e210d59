import { randomUUID } from "node:crypto";
import { SqlState } from "../db/sql-state.js";
import { badRequest, conflict } from "./control-error.js";
import { type Queryable, sqlState } from "./sql.js";

export interface User {
  id: string;
  email: string;
  name: string;
  createdAt: Date;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function normalizeEmail(value: string): string {
  const email = value.trim();
  if (!EMAIL.test(email) || email.length > 256)
    throw badRequest(`invalid email "${value}": expected an address like name@example.com`);
  return email;
}

function toUser(row: { id: string; email: string; name: string; created_at: Date }): User {
  return { id: row.id, email: row.email, name: row.name, createdAt: row.created_at };
}

/** Creates a user; the name defaults to the part of the email before the @. 409 when the email is taken. */
export async function createUser(db: Queryable, email: string, name?: string): Promise<User> {
  const normalized = normalizeEmail(email);
  try {
    const { rows } = await db.query(
      "INSERT INTO users (id, email, name) VALUES ($1, $2, $3) RETURNING id, email, name, created_at",
      [randomUUID(), normalized, name?.trim() || normalized.split("@")[0]],
    );
    return toUser(rows[0]);
  } catch (error) {
    if (sqlState(error) === SqlState.uniqueViolation)
      throw conflict(`a user with email ${normalized} already exists`);
    throw error;
  }
}

export async function findUserByEmail(db: Queryable, email: string): Promise<User | null> {
  const { rows } = await db.query(
    "SELECT id, email, name, created_at FROM users WHERE lower(email) = lower($1)",
    [email.trim()],
  );
  return rows[0] ? toUser(rows[0]) : null;
}

export async function getUser(db: Queryable, id: string): Promise<User | null> {
  const { rows } = await db.query("SELECT id, email, name, created_at FROM users WHERE id = $1", [id]);
  return rows[0] ? toUser(rows[0]) : null;
}
