import { beforeAll, describe, expect, it } from "vitest";
import { loadGuard } from "../guard/index.js";
import { StatementShapes } from "../guard/statement-shape.js";
import { createVerdictCache } from "../guard/verdict-cache.js";
import { ChargeWindow } from "./charge-window.js";

beforeAll(() => loadGuard());

const point = (aid: number) => `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid}`;
const byName = (name: string) => `SELECT id FROM items WHERE name = '${name}'`;

/** Each text's statement as the proxy's guard gives it (with its literal shape once one is learned). */
function guarded(texts: string[]) {
  const check = createVerdictCache();
  return texts.map((sql) => {
    const verdict = check(sql);
    if (verdict.kind !== "allow") throw new Error(`not allowed: ${sql}`);
    return verdict.statements[0]!;
  });
}

describe("ChargeWindow", () => {
  const texts = [point(1), point(2), byName("a"), point(3), byName("b"), point(1)];

  it("counts a literal shape's statements together, with this window's first text as the sample", () => {
    const statements = guarded(texts);
    // The first text of a shape teaches it, and a text seen before is answered as it was: neither has a shape.
    expect(statements.map((s) => s.shape !== undefined)).toEqual([false, true, false, true, true, false]);
    const window = new ChargeWindow();
    for (const s of statements) window.add(s.sql, 1, 10n, undefined, 0, 0, s.shape);
    // Per shape: the text that taught it, and its shaped texts.
    expect(window.distinctTexts).toBe(4);
    const shapes = new StatementShapes();
    const metadata = window.metadata("session", 1, shapes) as { shapes: Record<string, unknown>[] };
    expect(metadata.shapes).toEqual([
      {
        fingerprint: shapes.fingerprint(point(1)),
        sample: point(1),
        normalized: "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        calls: 4,
        rows: 4,
        cost: "0.000040",
      },
      {
        fingerprint: shapes.fingerprint(byName("a")),
        sample: byName("a"),
        normalized: "SELECT id FROM items WHERE name = $1",
        calls: 2,
        rows: 2,
        cost: "0.000020",
      },
    ]);
  });

  it("writes the same breakdown as a window that counts by text", () => {
    const statements = guarded(texts);
    const byShape = new ChargeWindow();
    const byText = new ChargeWindow();
    for (const [i, s] of statements.entries()) {
      byShape.add(s.sql, i, BigInt(i + 1), undefined, 7 * i, i, s.shape);
      byText.add(s.sql, i, BigInt(i + 1), undefined, 7 * i, i);
    }
    const shapes = new StatementShapes();
    const breakdown = (w: ChargeWindow) => (w.metadata("s", 1, shapes) as { shapes: unknown }).shapes;
    expect(breakdown(byShape)).toEqual(breakdown(byText));
    expect(byText.distinctTexts).toBe(5);
  });

  it("normalises a long statement whole before cutting its sample, so a cut inside a literal shows no parser error", () => {
    const sql = `SELECT id FROM items WHERE note = '${"x".repeat(190)} foreign trade' AND id > 5`;
    const window = new ChargeWindow();
    window.add(sql, 1, 1n);
    const [shape] = (window.metadata("s", 1, new StatementShapes()) as { shapes: Record<string, string>[] })
      .shapes;
    expect(shape?.sample).toHaveLength(200);
    expect(shape?.normalized).toBe("SELECT id FROM items WHERE note = $1 AND id > $2");
  });

  it("samples only the texts of its own session, whoever taught the shape", () => {
    const check = createVerdictCache();
    check(byName("another agent's secret"));
    const verdict = check(byName("mine"));
    if (verdict.kind !== "allow") throw new Error("not allowed");
    const [mine] = verdict.statements;
    const window = new ChargeWindow();
    window.add(mine!.sql, 1, 1n, undefined, 0, 0, mine!.shape);
    const text = JSON.stringify(window.metadata("s", 1, new StatementShapes()));
    expect(text).toContain("mine");
    expect(text).not.toContain("secret");
  });
});
