/** What running the statements produced, before it is paid for. */
export interface RunOutcome {
  rows: Record<string, unknown>[];
  rowCount: number;
  estimatedRows: number;
  statements: { command: string; rowCount: number }[];
}
