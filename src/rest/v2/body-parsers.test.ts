import { describe, expect, it } from "vitest";
import { FORM_ENCODED, parseFormBody } from "./body-parsers.js";

describe("form-encoded bodies", () => {
  it("nest bracketed keys and collect [] lists", () => {
    const body = parseFormBody(
      "project%5Bname%5D=demo&project[branch][name]=main&key_name=ci&ids[]=a&ids[]=b",
    );
    expect(body).toEqual({
      project: { name: "demo", branch: { name: "main" } },
      key_name: "ci",
      ids: ["a", "b"],
    });
    expect((body as Record<symbol, unknown>)[FORM_ENCODED]).toBe(true);
  });
});
