import { beforeAll, describe, expect, it } from "vitest";
import { loadGuard } from "./index.js";
import { parseTableName } from "./relation-names.js";

beforeAll(() => loadGuard());

describe("parseTableName", () => {
  it.each([
    ["airports", "airports"],
    ["Airports", "airports"],
    ["public.airports", "public.airports"],
    [" public . airports ", "public.airports"],
    ['"Mixed Case"', "Mixed Case"],
    ['sales."Q1"', "sales.Q1"],
  ])("reads %s as %s", (text, key) => {
    expect(parseTableName(text)).toBe(key);
  });

  it.each([
    "",
    "db.public.airports",
    "airports a",
    "airports, routes",
    "airports; DROP TABLE x",
    "airports -- x",
    "(SELECT 1)",
    "1",
    "select",
    "airports JOIN routes ON true",
    "x".repeat(201),
  ])("refuses %j", (text) => {
    expect(parseTableName(text)).toBeNull();
  });
});
