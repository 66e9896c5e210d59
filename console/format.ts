/** How the console writes figures: money as the gateway's 6-decimal strings, times in UTC. */
export function usdc(amount: string): string {
  return `${amount} USDC`;
}

export function count(value: number): string {
  return value.toLocaleString("en-US");
}

/** A relative change: "+25.0 %", "−10.0 %", "no change"; "new" when there was nothing before. */
export function change(value: number | null): { text: string; trend: "up" | "down" | "flat" | "new" } {
  if (value === null) return { text: "no earlier figures", trend: "new" };
  if (value === 0) return { text: "no change", trend: "flat" };
  const percent = (Math.abs(value) * 100).toFixed(1);
  return value > 0 ? { text: `+${percent} %`, trend: "up" } : { text: `−${percent} %`, trend: "down" };
}

/** `2026-05-01 12:00 UTC`, or the day alone for day buckets. */
export function utc(iso: string, dayOnly = false): string {
  const text = iso.replace("T", " ").slice(0, dayOnly ? 10 : 16);
  return dayOnly ? text : `${text} UTC`;
}

/** `0x1234…abcd`: enough to tell wallets apart; the full address is in the title. */
export function shortWallet(wallet: string): string {
  return `${wallet.slice(0, 6)}…${wallet.slice(-4)}`;
}
