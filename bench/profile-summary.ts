/**
 * Summarises a V8 .cpuprofile (from `PGTOLL_BENCH_CPU_PROF=1 npm run bench`):
 *   npx tsx bench/profile-summary.ts bench/results/cpu-<time>/CPU.<...>.0.001.cpuprofile [top] [skip-first-seconds]
 * prints self time by area (pgtoll source folder, package, Node internals, GC, idle) and the top functions by
 * self and by total (inclusive) time, as a share of the busy (non-idle) time.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame's code lives: `src/proxy`, a package name, `node:internal`, or a V8 pseudo-frame. */
function areaOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const src = /\/(src|bench)\/([^/]+)\//.exec(url);
  if (src) return `${src[1]}/${src[2]}`;
  if (url.startsWith("node:")) return "node internals";
  return url.replace(/^file:\/\/.*\//, "");
}

function frameKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/^file:\/\/.*?\/(src|bench|node_modules)\//, "$1/");
  return `${functionName || "(anonymous)"} ${file}${url ? `:${lineNumber + 1}` : ""}`;
}

function table(title: string, entries: [string, number][], busyUs: number, top: number): string[] {
  const lines = [title];
  for (const [name, us] of entries.sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(
      `  ${((us / busyUs) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${name}`,
    );
  }
  return lines;
}

function summariseProfile(profile: CpuProfile, top = 25, skipSeconds = 0): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<number, number>();
  let elapsedUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    elapsedUs += profile.timeDeltas[i] ?? 0;
    // Start-up (module loading, migrations) is not what a benchmark profiles.
    if (elapsedUs < skipSeconds * 1e6) continue;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  let totalUs = 0;
  let idleUs = 0;
  const areas = new Map<string, number>();
  const selfByFrame = new Map<string, number>();
  const totalByFrame = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    totalUs += us;
    if (node.callFrame.functionName === "(idle)") {
      idleUs += us;
      continue;
    }
    const area = areaOf(node.callFrame.url, node.callFrame.functionName);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const key = frameKey(node);
    selfByFrame.set(key, (selfByFrame.get(key) ?? 0) + us);
    // Inclusive time: every distinct frame on the stack gets the sample once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = frameKey(byId.get(at)!);
      if (seen.has(frame)) continue;
      seen.add(frame);
      totalByFrame.set(frame, (totalByFrame.get(frame) ?? 0) + us);
    }
  }
  const busyUs = totalUs - idleUs;
  return [
    `profile: ${(totalUs / 1e6).toFixed(1)} s sampled, ${(busyUs / 1e6).toFixed(1)} s busy (${((busyUs / totalUs) * 100).toFixed(0)}% of one core); shares are of busy time`,
    "",
    ...table("self time by area", [...areas], busyUs, top),
    "",
    ...table("self time by function", [...selfByFrame], busyUs, top),
    "",
    ...table(
      "total (inclusive) time by function",
      [...totalByFrame].filter(([k]) => !k.startsWith("(root)")),
      busyUs,
      top,
    ),
  ].join("\n");
}

const [file, top, skip] = process.argv.slice(2);
// A glob over a profile directory also matches the worker threads' profiles: a second file name is no count.
if (!file || [top, skip].some((arg) => arg !== undefined && !Number.isFinite(Number(arg)))) {
  process.stderr.write(
    "usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top] [skip-first-seconds]\n" +
      "  one profile: the main thread's is CPU.<...>.0.001.cpuprofile\n",
  );
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
process.stdout.write(`${summariseProfile(profile, Number(top ?? 25), Number(skip ?? 0))}\n`);
