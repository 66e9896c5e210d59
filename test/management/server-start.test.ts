import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";

const execFileAsync = promisify(execFile);
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("pgtoll start serves the management API", () => {
  it("on its embedded PostgreSQL, with the first key from `pgtoll admin bootstrap` run alongside", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pgtoll-v2-"));
    dirs.push(dir);
    const env = { PGTOLL_DATA_DIR: dir, PGTOLL_HTTP_PORT: "0", PGTOLL_PROXY_PORT: "0", DATABASE_URL: "" };
    const server = runCli(["start"], env);
    try {
      const ready = await server.waitFor(/^pgtoll ready/);
      const [httpUrl, proxyUrl] = ready.split(" ").slice(2);
      const bootstrap = runCli(["admin", "bootstrap", "--email", "first@example.com", "--org", "First"], env);
      expect(await bootstrap.exited, bootstrap.stderr()).toBe(0);
      const key = bootstrap.stdout().trim().split("\n").pop()!;

      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
      const created = await fetch(`${httpUrl}/api/v2/projects`, {
        method: "POST",
        headers,
        body: JSON.stringify({ project: { name: "first" } }),
      });
      expect(created.status).toBe(201);
      const body = (await created.json()) as {
        project: { id: string };
        branch: { current_state: string };
        connection_uris: { connection_uri: string }[];
      };
      expect(body.branch.current_state).toBe("ready");
      // connection URIs point at this server's proxy port
      const uri = body.connection_uris[0]!.connection_uri;
      expect(new URL(uri).port).toBe(new URL(proxyUrl!).port);
      // and psql reaches the project's database through that proxy with it
      const psql = await execFileAsync(
        "psql",
        [uri, "-X", "-At", "-c", "SELECT current_setting('application_name')"],
        {
          env: { ...process.env, PGHOSTADDR: "127.0.0.1" },
        },
      );
      // the client's own application_name reaches the database
      expect(psql.stdout.trim()).toBe("psql");
      const listed = (await (await fetch(`${httpUrl}/api/v2/projects`, { headers })).json()) as {
        projects: { id: string }[];
      };
      expect(listed.projects.map((p) => p.id)).toEqual([body.project.id]);
      const docs = (await (await fetch(`${httpUrl}/docs/json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(docs.paths)).toEqual(
        expect.arrayContaining(["/api/v2/projects", "/api/v2/projects/{project_id}/branches"]),
      );
    } finally {
      server.child.kill("SIGTERM");
    }
    expect(await server.exited).toBe(0);
  }, 120_000);
});
