import { type TObject, type TSchema, type TString, Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest, FastifySchema } from "fastify";
import type { OperationRow } from "../../control/operations.js";
import type { Plane } from "../../control/plane.js";
import type { Principal } from "../../control/principal.js";
import type { Queryable } from "../../control/sql.js";
import { principalOf } from "./authentication.js";
import { presentOperation } from "./present-resources.js";
import { typed } from "./route-helpers.js";
import { BranchParams, errorResponses, Id, Operations } from "./schemas/common.js";

/** What a change to an object answers: the object, the operations, and for a role its new password. */
type ObjectChange<Row, Item extends string> = Record<Item, Row> & {
  operations: OperationRow[];
  password?: string;
};

/** One kind of per-branch object (databases, roles): its names in paths and answers, and its control calls. */
export interface BranchObjectKind<Row, Item extends string, NameParam extends string, Input> {
  /** The path segment and the field of list answers: `databases`. */
  collection: string;
  /** The field of one object in answers: `database`. */
  item: Item;
  /** The path parameter naming one object: `database_name`. */
  nameParam: NameParam;
  schema: TSchema;
  tags: string[];
  summaries: { list: string; create: string; read: string; remove: string };
  /** The creation body: `{[item]: Input}`. */
  createBody: TSchema;
  /** The object as answers show it; `password` only where a change made one. */
  present(row: Row, password?: string): unknown;
  list(db: Queryable, principal: Principal, projectId: string, branchId: string): Promise<Row[]>;
  read(db: Queryable, principal: Principal, projectId: string, branchId: string, name: string): Promise<Row>;
  create(
    plane: Plane,
    principal: Principal,
    projectId: string,
    branchId: string,
    input: Input,
  ): Promise<ObjectChange<NoInfer<Row>, Item>>;
  remove(
    plane: Plane,
    principal: Principal,
    projectId: string,
    branchId: string,
    name: string,
  ): Promise<ObjectChange<NoInfer<Row>, Item>>;
}

/**
 * Registers the routes every per-branch object has (list, create, get, delete) under
 * `/projects/:project_id/branches/:branch_id/<collection>`. Returns, for the kind's own routes: the base path,
 * the schemas of one object's path parameters and of an answer with operations, the project, branch and
 * object name of a request's path (`named`), and the answer to a change of an object (`answer`).
 */
export function branchObjectRoutes<Row, Item extends string, NameParam extends string, Input>(
  app: FastifyInstance,
  plane: Plane,
  kind: BranchObjectKind<Row, Item, NameParam, Input>,
) {
  type ObjectParams = { project_id: string; branch_id: string } & Record<NameParam, string>;
  const base = `/projects/:project_id/branches/:branch_id/${kind.collection}`;
  const Params = Type.Object({
    project_id: Id,
    branch_id: Id,
    [kind.nameParam]: Type.String({ minLength: 1, maxLength: 63 }),
  }) as unknown as TObject<{ project_id: typeof Id; branch_id: typeof Id } & Record<NameParam, TString>>;
  const WithOperations = Type.Object({ [kind.item]: kind.schema, operations: Operations });
  const route = (
    summary: string,
    params: TSchema,
    response: Record<number, TSchema>,
    body?: TSchema,
  ): { schema: FastifySchema } => ({
    // A `body` key, even undefined, makes fastify warn at start-up for every route without a body.
    schema: {
      tags: kind.tags,
      summary,
      params,
      ...(body ? { body } : {}),
      response: { ...response, ...errorResponses },
    },
  });
  /** The project, branch and object name of a request's path. */
  const named = (request: FastifyRequest) => {
    const params = request.params as ObjectParams;
    return [params.project_id, params.branch_id, params[kind.nameParam]] as const;
  };
  const answer = (change: ObjectChange<Row, Item>) => ({
    [kind.item]: kind.present(change[kind.item], change.password),
    operations: change.operations.map(presentOperation),
  });

  app.get(
    base,
    route(kind.summaries.list, BranchParams, {
      200: Type.Object({ [kind.collection]: Type.Array(kind.schema) }),
    }),
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const rows = await kind.list(plane.db, principalOf(request), project_id, branch_id);
      return { [kind.collection]: rows.map((row) => kind.present(row)) };
    },
  );

  app.post(
    base,
    route(kind.summaries.create, BranchParams, { 201: WithOperations }, kind.createBody),
    async (request, reply) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const input = (request.body as Record<Item, Input>)[kind.item];
      const created = await kind.create(plane, principalOf(request), project_id, branch_id, input);
      reply.code(201);
      return answer(created);
    },
  );

  app.get(
    `${base}/:${kind.nameParam}`,
    route(kind.summaries.read, Params, { 200: Type.Object({ [kind.item]: kind.schema }) }),
    async (request) => ({
      [kind.item]: kind.present(await kind.read(plane.db, principalOf(request), ...named(request))),
    }),
  );

  app.delete(
    `${base}/:${kind.nameParam}`,
    route(kind.summaries.remove, Params, { 200: WithOperations }),
    async (request) => answer(await kind.remove(plane, principalOf(request), ...named(request))),
  );

  return { base, Params, WithOperations, named, answer };
}
