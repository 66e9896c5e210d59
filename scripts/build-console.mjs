// Bundles the provider console (console/) into dist/console/: one script, one stylesheet and the page, which
// pgtoll serves itself at /console (src/rest/routes/console.ts). Run by `npm run build`, so by `npm ci`.
import { copyFile, mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const out = `${root}dist/console`;
await mkdir(out, { recursive: true });
await build({
  entryPoints: { console: `${root}console/main.ts` },
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  outdir: out,
  legalComments: "none",
  logLevel: "warning",
});
await copyFile(`${root}console/index.html`, `${out}/index.html`);
