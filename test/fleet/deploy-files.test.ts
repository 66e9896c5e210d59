/* biome-ignore-all lint/suspicious/noExplicitAny: parsed YAML is walked as plain data */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1/PodDisruptionBudget";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { loadConfig, optionSpecs } from "../../src/config.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { type PgtollProcess, startPgtollProcess } from "../support/pgtoll-process.js";

const deploy = fileURLToPath(new URL("../../deploy", import.meta.url));
const options = new Set(Object.values(optionSpecs).map((spec) => spec.env));
const HAPROXY = "/usr/sbin/haproxy";

const compose = parse(readFileSync(join(deploy, "compose.yaml"), "utf8"), { merge: true }) as any;
const manifests = readdirSync(join(deploy, "kubernetes"))
  .filter((name) => name.endsWith(".yaml"))
  .flatMap((name) =>
    parseAllDocuments(readFileSync(join(deploy, "kubernetes", name), "utf8")).map((doc) => doc.toJS() as any),
  );
const haproxyConfig = readFileSync(join(deploy, "haproxy.cfg"), "utf8");

const kind = (name: string) => manifests.filter((doc) => doc.kind === name);
const deployment = kind("Deployment")[0];
const container = deployment.spec.template.spec.containers[0];
const pgtollServices = Object.entries(compose.services as Record<string, any>).filter(
  ([, service]) => service.image === "pgtoll:local",
);
/** `${NAME:?message}` and `${NAME}` as a user would fill them in. */
const filled = (value: string) =>
  String(value).replace(/\$\{(\w+)[^}]*\}/g, (_, name: string) =>
    name === "PGTOLL_SECRET_KEY" ? "ab".repeat(32) : "example",
  );

describe("deploy/ files", () => {
  it("run three pgtoll processes, HAProxy, PostgreSQL and Redis in compose", () => {
    expect(pgtollServices.map(([name]) => name)).toEqual(["pgtoll1", "pgtoll2", "pgtoll3"]);
    expect(Object.keys(compose.services)).toEqual(expect.arrayContaining(["haproxy", "postgres", "redis"]));
  });

  it("set only real pgtoll options, with values pgtoll accepts", () => {
    const kubernetesEnv = Object.fromEntries(
      (container.env as any[]).map((entry) => [entry.name, entry.value ?? "from-a-secret"]),
    );
    const composeEnv = pgtollServices[0]![1].environment as Record<string, string>;
    for (const name of [...Object.keys(kubernetesEnv), ...Object.keys(composeEnv)])
      expect(options.has(name), `${name} is not a pgtoll option`).toBe(true);
    const env = Object.fromEntries(Object.entries(composeEnv).map(([name, value]) => [name, filled(value)]));
    expect(() => loadConfig(env)).not.toThrow();
    expect(() =>
      loadConfig({
        ...kubernetesEnv,
        DATABASE_URL: "postgres://pgtoll@postgres/pgtoll",
        PGTOLL_SECRET_KEY: "ab".repeat(32),
      }),
    ).not.toThrow();
  });

  it("are valid Kubernetes objects by the API's own schemas (kubernetes-models)", () => {
    const models: Record<string, new (data: any) => { validate(): void }> = {
      "apps/v1 Deployment": Deployment,
      "v1 Service": Service,
      "v1 Secret": Secret,
      "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
      "autoscaling/v2 HorizontalPodAutoscaler": HorizontalPodAutoscaler,
    };
    expect(manifests.map((doc) => `${doc.apiVersion} ${doc.kind}`).sort()).toEqual(
      Object.keys(models).sort(),
    );
    for (const doc of manifests) {
      const Model = models[`${doc.apiVersion} ${doc.kind}`]!;
      expect(() => new Model(doc).validate(), `${doc.kind} ${doc.metadata?.name}`).not.toThrow();
    }
    // The validator itself refuses what the API server would.
    const broken = structuredClone(deployment);
    broken.spec.template.spec.containers[0].ports[0].containerPort = "http";
    expect(() => new Deployment(broken).validate()).toThrow(/containerPort/);
  });

  it("give Kubernetes a readiness probe on /ready, liveness on /health, and a grace longer than the drain's", () => {
    expect(container.readinessProbe.httpGet.path).toBe("/ready");
    expect(container.livenessProbe.httpGet.path).toBe("/health");
    const grace = Number((container.env as any[]).find((e) => e.name === "PGTOLL_SHUTDOWN_GRACE_MS").value);
    const preStop = Number(container.lifecycle.preStop.exec.command[1]);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      grace + preStop * 1000,
    );
    const composeEnv = pgtollServices[0]![1].environment;
    const composeStop =
      Number(composeEnv.PGTOLL_SHUTDOWN_DELAY_MS) + Number(composeEnv.PGTOLL_SHUTDOWN_GRACE_MS);
    expect(Number.parseInt(pgtollServices[0]![1].stop_grace_period, 10) * 1000).toBeGreaterThan(composeStop);
  });

  it("tie the Kubernetes objects together: secret keys, selectors, ports, the autoscaler's target", () => {
    const secret = kind("Secret")[0];
    for (const entry of container.env as any[]) {
      const ref = entry.valueFrom?.secretKeyRef;
      if (!ref) continue;
      expect(ref.name).toBe(secret.metadata.name);
      expect(Object.keys(secret.stringData)).toContain(ref.key);
    }
    expect((container.env as any[]).map((e) => e.name)).toEqual(
      expect.arrayContaining(["DATABASE_URL", "PGTOLL_SECRET_KEY"]),
    );
    const labels = deployment.spec.template.metadata.labels;
    expect(deployment.spec.selector.matchLabels).toEqual(labels);
    expect(kind("Service")[0].spec.selector).toEqual(labels);
    expect(kind("PodDisruptionBudget")[0].spec.selector.matchLabels).toEqual(labels);
    const portNames = (container.ports as any[]).map((port) => port.name);
    for (const port of kind("Service")[0].spec.ports) expect(portNames).toContain(port.targetPort);
    const target = kind("HorizontalPodAutoscaler")[0].spec.scaleTargetRef;
    expect(target).toMatchObject({ kind: "Deployment", name: deployment.metadata.name });
    expect(container.resources.requests.cpu).toBeDefined();
  });

  it.skipIf(!existsSync(HAPROXY))(
    "give HAProxy a configuration it accepts: PROXY v2 to the wire port, /ready checks",
    () => {
      // `haproxy -c` checks the whole file; the servers' names resolve only inside compose's network.
      execFileSync(HAPROXY, ["-c", "-q", "-f", join(deploy, "haproxy.cfg")], { stdio: "pipe" });
      const wire = haproxyConfig.slice(haproxyConfig.indexOf("backend pgtoll_wire"));
      expect(wire.match(/^\s+server .* send-proxy-v2 /gm)).toHaveLength(3);
      expect(haproxyConfig).toMatch(/backend pgtoll_api\n\s+mode http/);
    },
  );

  describe("on a running pgtoll", () => {
    let meta: { db: TestDatabase; close(): Promise<void> };
    let gateway: PgtollProcess;
    beforeAll(async () => {
      meta = await createMetadataDatabase();
      gateway = await startPgtollProcess(meta.db.url);
    }, 120_000);
    afterAll(async () => {
      await gateway?.stop();
      await meta?.close();
    });

    it("answers every probe path the files name with 200", async () => {
      const paths = new Set<string>([
        container.readinessProbe.httpGet.path,
        container.livenessProbe.httpGet.path,
        container.startupProbe.httpGet.path,
        ...[...haproxyConfig.matchAll(/option httpchk GET (\S+)/g)].map((match) => match[1]!),
        ...[
          ...String(pgtollServices[0]![1].healthcheck.test.at(-1)).matchAll(/127\.0\.0\.1:3000(\/\w+)/g),
        ].map((match) => match[1]!),
      ]);
      expect([...paths].sort()).toEqual(["/health", "/ready"]);
      for (const path of paths) expect((await fetch(`${gateway.httpUrl}${path}`)).status, path).toBe(200);
    });
  });
});
