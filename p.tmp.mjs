import { loadModule, parseSync } from "libpg-query";
await loadModule();
for (const q of process.argv.slice(2)) {
  try { console.log(q, "=>", JSON.stringify(parseSync(q))); } catch (e) { console.log(q, "ERR", e.message); }
}
