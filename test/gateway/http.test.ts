import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

let gateway: TestGateway;
let limited: TestGateway;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_BODY_LIMIT: "2048" } });
  limited = await startTestGateway({ env: { PGTOLL_RATE_LIMIT: "on" } });
});
afterAll(async () => {
  await gateway?.close();
  await limited?.close();
});

describe("errors", () => {
  it("answers an unknown route with 404 {error}", async () => {
    const res = await gateway.app.inject({ method: "GET", url: "/api/nothing?x=1" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: "route not found: GET /api/nothing" });
  });

  it("answers malformed JSON with 400 {error}", async () => {
    const res = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      headers: { "content-type": "application/json" },
      payload: '{"sql": "SELECT 1",',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/malformed JSON/);
  });

  it("answers a wrong content type with 415 {error}", async () => {
    const res = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      headers: { "content-type": "text/plain" },
      payload: "SELECT 1",
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().error).toMatch(/application\/json/);
  });

  it("answers an oversize body with 413 {error}", async () => {
    const res = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: "x".repeat(5000) },
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toMatch(/too large/);
  });

  it("answers an empty JSON body with 400 {error}", async () => {
    const res = await gateway.app.inject({
      method: "POST",
      url: "/api/deposit",
      headers: { "content-type": "application/json" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toHaveProperty("error");
  });

  it("sends a request id with every answer", async () => {
    const answers = [
      await gateway.app.inject({ method: "GET", url: "/api/health" }),
      await gateway.app.inject({ method: "GET", url: "/api/nothing" }),
      await gateway.app.inject({
        method: "POST",
        url: "/api/query",
        headers: { "content-type": "text/plain" },
        payload: "SELECT 1",
      }),
      await gateway.app.inject({
        method: "OPTIONS",
        url: "/api/query",
        headers: { origin: "https://agent.example", "access-control-request-method": "POST" },
      }),
    ];
    expect(answers.map((res) => res.statusCode)).toEqual([200, 404, 415, 204]);
    const ids = answers.map((res) => res.headers["x-request-id"]);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("keeps the request id the client sent", async () => {
    const res = await gateway.app.inject({
      method: "GET",
      url: "/api/nothing",
      headers: { "x-request-id": "client-chosen-42" },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers["x-request-id"]).toBe("client-chosen-42");
  });
});

describe("CORS", () => {
  it("allows any origin, the spec's methods and headers", async () => {
    const res = await gateway.app.inject({
      method: "OPTIONS",
      url: "/api/query",
      headers: {
        origin: "https://agent.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-api-key",
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers["access-control-allow-origin"]).toBe("*");
    expect(res.headers["access-control-allow-methods"]).toBe("GET, POST, PUT, DELETE, OPTIONS");
    expect(res.headers["access-control-allow-headers"]).toBe("Content-Type, X-API-Key");
    const get = await gateway.app.inject({
      method: "GET",
      url: "/api/health",
      headers: { origin: "https://x.example" },
    });
    expect(get.headers["access-control-allow-origin"]).toBe("*");
    expect(get.headers["access-control-expose-headers"]).toBe(
      "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, X-Request-Id",
    );
    expect(get.headers.vary).toBe("Origin");
  });

  it("sends CORS headers only to requests with an Origin, and Vary: Origin to every one", async () => {
    const res = await gateway.app.inject({ method: "GET", url: "/api/health" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
    expect(res.headers["access-control-expose-headers"]).toBeUndefined();
    expect(res.headers.vary).toBe("Origin");
  });

  it("allows PATCH and Authorization under /api/v2", async () => {
    const res = await gateway.app.inject({
      method: "OPTIONS",
      url: "/api/v2/projects/p-1",
      headers: { origin: "https://console.example", "access-control-request-method": "PATCH" },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers["access-control-allow-origin"]).toBe("*");
    expect(res.headers["access-control-allow-methods"]).toBe("GET, POST, PUT, PATCH, DELETE, OPTIONS");
    expect(res.headers["access-control-allow-headers"]).toBe("Content-Type, Authorization, Accept");
    expect(res.headers["content-length"]).toBe("0");
  });

  it("refuses an OPTIONS request that is not a preflight", async () => {
    const res = await gateway.app.inject({
      method: "OPTIONS",
      url: "/api/query",
      headers: { origin: "https://agent.example" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toBe("Invalid Preflight Request");
  });
});

describe("rate limits", () => {
  it("limits the query endpoint to 20 per window per IP, with headers and a 429 body", async () => {
    const payload = { sql: "SELECT 1", agentWallet: "0x12", providerId: "x" };
    for (let i = 1; i <= 20; i++) {
      const res = await limited.app.inject({
        method: "POST",
        url: "/api/query",
        payload,
        remoteAddress: "10.0.0.1",
      });
      expect(res.statusCode).toBe(400);
      expect(res.headers["x-ratelimit-limit"]).toBe("20");
      expect(res.headers["x-ratelimit-remaining"]).toBe(String(20 - i));
      const reset = Number(res.headers["x-ratelimit-reset"]);
      expect(reset).toBeGreaterThan(Date.now() / 1000 + 890);
      expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 900);
    }
    const res = await limited.app.inject({
      method: "POST",
      url: "/api/query",
      payload,
      remoteAddress: "10.0.0.1",
    });
    expect(res.statusCode).toBe(429);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(["error", "retryAfter"]);
    expect(body.error).toMatch(/too many requests/);
    expect(body.retryAfter).toBeGreaterThan(890);
    expect(body.retryAfter).toBeLessThanOrEqual(900);
    expect(res.headers["retry-after"]).toBe(String(body.retryAfter));
    expect(res.headers["x-ratelimit-remaining"]).toBe("0");
    // another client is not affected
    const other = await limited.app.inject({
      method: "POST",
      url: "/api/query",
      payload,
      remoteAddress: "10.0.0.2",
    });
    expect(other.statusCode).toBe(400);
  });

  it("limits deposits to 10 and general endpoints to 100 per window", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      const res = await limited.app.inject({
        method: "POST",
        url: "/api/deposit",
        payload: {},
        remoteAddress: "10.0.1.1",
      });
      statuses.push(res.statusCode);
    }
    expect(statuses.slice(0, 10).every((s) => s === 400)).toBe(true);
    expect(statuses[10]).toBe(429);
    let last = 0;
    for (let i = 0; i < 101; i++) {
      last = (
        await limited.app.inject({ method: "GET", url: "/api/transactions/0x12", remoteAddress: "10.0.1.1" })
      ).statusCode;
      if (i === 99) expect(last).toBe(400);
    }
    expect(last).toBe(429);
  });

  it("does not limit health, metrics or docs", async () => {
    for (let i = 0; i < 120; i++) {
      const res = await limited.app.inject({ method: "GET", url: "/api/health", remoteAddress: "10.0.2.1" });
      expect(res.statusCode).toBe(200);
      expect(res.headers["x-ratelimit-limit"]).toBeUndefined();
    }
  });
});

describe("observability", () => {
  it("reports healthy when its database answers", async () => {
    const res = await gateway.app.inject({ method: "GET", url: "/api/health" });
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.json()).sort()).toEqual(["status", "timestamp"]);
    expect(res.json().status).toBe("healthy");
  });

  it("exports Prometheus metrics", async () => {
    await gateway.app.inject({ method: "GET", url: "/api/health" });
    const res = await gateway.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/text\/plain/);
    expect(res.body).toMatch(
      /pgtoll_http_request_duration_seconds_count\{method="GET",route="\/api\/health",status_code="200"\} \d+/,
    );
    expect(res.body).toContain("pgtoll_process_cpu_seconds_total");
    for (const name of [
      "pgtoll_queries_total",
      "pgtoll_rows_metered_total",
      "pgtoll_charged_micro_usdc_total",
      "pgtoll_deposits_credited_total",
    ]) {
      expect(res.body).toContain(`# TYPE ${name} counter`);
    }
  });

  it("serves an OpenAPI document generated from the route schemas, and /docs", async () => {
    const res = await gateway.app.inject({ method: "GET", url: "/docs/json" });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    for (const path of [
      "/api/providers/register",
      "/api/providers/{id}/pricing",
      "/api/balance/{wallet}/{providerId}",
      "/api/deposit",
      "/api/query",
      "/api/transactions/{wallet}",
      "/api/health",
    ]) {
      expect(doc.paths).toHaveProperty([path]);
    }
    expect(doc.paths["/api/query"].post.requestBody.content["application/json"].schema.required).toEqual([
      "sql",
      "agentWallet",
      "providerId",
    ]);
    // Prices are public (agents read them before paying): no key in the document, and none refused.
    const readPricing = doc.paths["/api/providers/{id}/pricing"].get;
    const headerNames = (operation: { parameters?: { in: string; name: string }[] }) =>
      (operation.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name.toLowerCase());
    expect(headerNames(readPricing)).not.toContain("x-api-key");
    expect(Object.keys(readPricing.responses)).not.toContain("401");
    expect(headerNames(doc.paths["/api/providers/{id}/pricing"].post)).toContain("x-api-key");
    const page = await gateway.app.inject({ method: "GET", url: "/docs/" });
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/swagger/i);
  });
});

describe("when the database is gone", () => {
  it("answers 503 unhealthy", async () => {
    const doomed = await startTestGateway();
    try {
      await doomed.ctx.db.end();
      const res = await doomed.app.inject({ method: "GET", url: "/api/health" });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ status: "unhealthy" });
      expect(res.json().error).toMatch(/database unreachable/);
      // an unexpected failure is a bare 500 {error}: no stack trace, no internals
      const failed = await doomed.app.inject({ method: "GET", url: `/api/transactions/0x${"a".repeat(40)}` });
      expect(failed.statusCode).toBe(500);
      expect(failed.json()).toEqual({ error: "internal server error" });
    } finally {
      await doomed.app.close();
    }
  });
});
