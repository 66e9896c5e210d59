import pino, { type Logger } from "pino";
import { bufferedStderr } from "./log-buffer.js";

/** Paths whose values never reach a log line: API keys, passwords, connection strings. */
export const redactedPaths = [
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  "connectionString",
  "*.connectionString",
  "password",
  "*.password",
  "apiKey",
  "*.apiKey",
  "secretKey",
  "*.secretKey",
  "x402SettlerKey",
  "*.x402SettlerKey",
  'req.headers["payment-signature"]',
];

export function createLogger(level: string): Logger {
  return pino(
    { level, redact: { paths: redactedPaths, censor: "[redacted]" }, base: { service: "pgtoll" } },
    // Logs go to stderr; stdout carries only the lines meant for people (e.g. "pgtoll ready").
    bufferedStderr(),
  );
}

export type { Logger };
