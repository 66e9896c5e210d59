import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { visibleProjects } from "../../control/access.js";
import { requireMembership } from "../../control/api-keys.js";
import { consumptionOf, periodId, type Timeframe, timeframes } from "../../control/consumption.js";
import { badRequest } from "../../control/control-error.js";
import type { Principal } from "../../control/principal.js";
import type { Queryable } from "../../control/sql.js";
import { principalOf } from "./authentication.js";
import { type RouteOptions, tags } from "./route-helpers.js";
import { errorResponses } from "./schemas/common.js";

const Frame = Type.Object({
  timeframe_start: Type.String(),
  timeframe_end: Type.String(),
  active_time_seconds: Type.Integer({
    description: "seconds sessions were connected to the project's databases",
  }),
  compute_time_seconds: Type.Integer({ description: "seconds its databases spent executing statements" }),
  written_data_bytes: Type.Integer({ description: "growth of its databases' size over the timeframe" }),
  synthetic_storage_size_bytes: Type.Integer({
    description: "size of its databases at the timeframe's last sample",
  }),
  logical_size_bytes: Type.Integer({
    description: "the same: databases are stored whole, there is no WAL history",
  }),
});
const Period = Type.Object({
  period_id: Type.String(),
  period_plan: Type.String(),
  period_start: Type.String(),
  period_end: Type.String(),
  consumption: Type.Array(Frame),
});
const Window = {
  from: Type.String(),
  to: Type.String(),
  granularity: Type.String({
    description: "hourly (168 hours back at most), daily (60 days) or monthly (a year)",
  }),
  org_id: Type.Optional(Type.String({ pattern: "^[a-z0-9-]{1,60}$" })),
};
type WindowQuery = { from: string; to: string; granularity: string; org_id?: string };

function period(key: string, bounds: Date[], consumption: Timeframe[]) {
  return {
    period_id: periodId(key, bounds[0]!),
    period_plan: "pgtoll",
    period_start: bounds[0]!.toISOString(),
    period_end: bounds[bounds.length - 1]!.toISOString(),
    consumption,
  };
}

/** The caller's projects (optionally one organization's, or those named), in a stable order. */
async function projectsOf(db: Queryable, principal: Principal, orgId: string | undefined, ids?: string[]) {
  const visible = visibleProjects(principal, 1);
  const params: unknown[] = [...visible.params];
  const where = [visible.sql];
  if (orgId !== undefined) {
    if (principal.kind === "personal") await requireMembership(db, orgId, principal.userId, false);
    params.push(orgId);
    where.push(`p.org_id = $${params.length}`);
  }
  if (ids?.length) {
    params.push(ids);
    where.push(`p.id = ANY($${params.length}::text[])`);
  }
  const { rows } = await db.query(
    `SELECT p.id FROM projects p WHERE ${where.join(" AND ")} ORDER BY p.id`,
    params,
  );
  return rows.map((r) => r.id as string);
}

/**
 * Consumption history (Neon's `/consumption_history/projects` and `/consumption_history/account`): compute
 * time, connected time, data written and size, per timeframe, from the samples the management sweep takes.
 */
export async function consumptionRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.get(
    "/consumption_history/projects",
    {
      schema: {
        tags: tags.projects,
        summary: "Consumption of each of the caller's projects, per timeframe",
        querystring: Type.Object({
          ...Window,
          cursor: Type.Optional(Type.String()),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
          project_ids: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
        }),
        response: {
          200: Type.Object({
            projects: Type.Array(Type.Object({ project_id: Type.String(), periods: Type.Array(Period) })),
            pagination: Type.Optional(Type.Object({ cursor: Type.String() })),
          }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const query = request.query as WindowQuery & {
        cursor?: string;
        limit?: number;
        project_ids?: string | string[];
      };
      const bounds = timeframes(query.from, query.to, query.granularity);
      const ids = [query.project_ids ?? []]
        .flat()
        .flatMap((v) => v.split(","))
        .filter(Boolean);
      if (ids.length > 100) throw badRequest("project_ids names 100 projects at most");
      const all = await projectsOf(db, principalOf(request), query.org_id, ids);
      // The cursor is the last project id of the previous page.
      const after = query.cursor ? all.filter((id) => id > query.cursor!) : all;
      const page = after.slice(0, query.limit ?? 10);
      const consumption = await consumptionOf(db, page, bounds);
      return {
        projects: page.map((id) => ({
          project_id: id,
          periods: [period(id, bounds, consumption.get(id) ?? [])],
        })),
        ...(after.length > page.length ? { pagination: { cursor: page[page.length - 1]! } } : {}),
      };
    },
  );

  app.get(
    "/consumption_history/account",
    {
      schema: {
        tags: tags.projects,
        summary: "Consumption of all the caller's projects together, per timeframe",
        querystring: Type.Object(Window),
        response: { 200: Type.Object({ periods: Type.Array(Period) }), ...errorResponses },
      },
    },
    async (request) => {
      const query = request.query as WindowQuery;
      const bounds = timeframes(query.from, query.to, query.granularity);
      const principal = principalOf(request);
      const ids = await projectsOf(db, principal, query.org_id);
      const perProject = [...(await consumptionOf(db, ids, bounds)).values()];
      const frames = bounds.slice(0, -1).map((_, i) => {
        const sum = (field: keyof Omit<Timeframe, "timeframe_start" | "timeframe_end">) =>
          perProject.reduce((total, frames) => total + (frames[i]?.[field] ?? 0), 0);
        return {
          timeframe_start: bounds[i]!.toISOString(),
          timeframe_end: bounds[i + 1]!.toISOString(),
          active_time_seconds: sum("active_time_seconds"),
          compute_time_seconds: sum("compute_time_seconds"),
          written_data_bytes: sum("written_data_bytes"),
          synthetic_storage_size_bytes: sum("synthetic_storage_size_bytes"),
          logical_size_bytes: sum("logical_size_bytes"),
        };
      });
      return { periods: [period(query.org_id ?? principal.accountId, bounds, frames)] };
    },
  );
}
