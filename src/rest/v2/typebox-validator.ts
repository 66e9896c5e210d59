import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import type { FastifySchemaCompiler } from "fastify";
import { FORM_ENCODED } from "./body-parsers.js";

/**
 * Validates the v2 routes with TypeBox itself. Path, query and form-encoded values arrive as strings, so they
 * are converted to the schema's types first (`?limit=10` is an integer); JSON bodies are checked as sent.
 * Unknown fields are accepted, as Neon's clients send fields this API does not use.
 */
export const typeboxValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = TypeCompiler.Compile(schema);
  const convert = httpPart === "querystring" || httpPart === "params";
  // A body whose fields are all optional may be left out altogether (POST /branches with no body).
  const omittable = httpPart === "body" && schema.type === "object" && !schema.required?.length;
  return (data: unknown) => {
    if (omittable && (data === undefined || data === null)) return { value: {} };
    const form = typeof data === "object" && data !== null && FORM_ENCODED in data;
    const value = convert || form ? Value.Convert(schema, data) : data;
    if (check.Check(value)) return { value };
    const first = check.Errors(value).First();
    const path = first?.path ? ` ${first.path.replace(/^\//, "").replace(/\//g, ".")}` : "";
    return { error: new Error(`${httpPart}${path}: ${first?.message ?? "is invalid"}`) };
  };
};
