import type { Credentials } from "./api.js";

/** sessionStorage: the key stays with this tab and is gone when it closes. */
const STORAGE_KEY = "pgtoll.console.credentials";

export function savedCredentials(): Credentials | null {
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? "null") as Credentials | null;
    return saved && typeof saved.providerId === "string" && typeof saved.apiKey === "string" ? saved : null;
  } catch {
    return null;
  }
}

export function saveCredentials(credentials: Credentials): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(credentials));
}

export function forgetCredentials(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}
