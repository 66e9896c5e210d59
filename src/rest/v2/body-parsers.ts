import type { FastifyInstance } from "fastify";

/** Marks a body that arrived form-encoded: its values are strings, converted to the schema's types. */
export const FORM_ENCODED = Symbol("form-encoded");

type Nested = { [key: string]: Nested | Nested[] | string | string[] };

/**
 * `project[name]=x&project[branch][name]=main&ids[]=a&ids[]=b` -> `{project: {name, branch: {name}}, ids: [a, b]}`
 * (the bracket notation form encoders use for nested fields).
 */
export function parseFormBody(text: string): Record<string, unknown> {
  const root: Nested = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const path = key.replace(/\]/g, "").split("[");
    let node: Nested = root;
    path.forEach((segment, i) => {
      const last = i === path.length - 1;
      const nextIsList = path[i + 1] === "";
      if (last) {
        if (segment === "") return;
        node[segment] = value;
        return;
      }
      if (nextIsList) {
        const list = Array.isArray(node[segment]) ? (node[segment] as string[]) : [];
        list.push(value);
        node[segment] = list;
        return;
      }
      if (typeof node[segment] !== "object" || Array.isArray(node[segment])) node[segment] = {};
      node = node[segment] as Nested;
    });
  }
  return Object.defineProperty(root, FORM_ENCODED, { value: true, enumerable: false });
}

function bodyError(statusCode: number, message: string): Error {
  return Object.assign(new Error(message), { statusCode });
}

/**
 * The v2 API reads JSON bodies and form-encoded ones (spec: it "accepts form-encoded request bodies"). A request
 * without a body may carry any Content-Type (clients send one on bodiless POSTs such as /start); a non-empty
 * body of another type is a 415.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(bodyError(400, `malformed JSON body: ${(error as Error).message}`), undefined);
    }
  });
  app.addContentTypeParser(
    "application/x-www-form-urlencoded",
    { parseAs: "string" },
    (_request, body, done) => {
      const text = String(body);
      done(null, text.trim() === "" ? undefined : parseFormBody(text));
    },
  );
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (String(body) === "") return done(null, undefined);
    done(
      bodyError(
        415,
        `unsupported Content-Type ${request.headers["content-type"]}: send JSON (application/json) or a form`,
      ),
      undefined,
    );
  });
}
