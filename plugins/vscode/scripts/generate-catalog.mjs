/** Generates src/catalog.generated.ts — the IDE commands the built-in registry's VS Code-family entries may ask a plugin to run (the extension's default allow-list) — from registry/default.yaml; `--check` fails when the committed file is stale. */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const registryPath = join(here, "..", "..", "..", "registry", "default.yaml");
const outPath = join(here, "..", "src", "catalog.generated.ts");

/** True when an entry applies to a VS Code-family product (not only JetBrains IDEs). */
function appliesToVsCodeFamily(entry) {
  const products = entry.applies_to?.products ?? ["any"];
  return products.some((product) => !String(product).startsWith("jetbrains"));
}

const registry = parse(readFileSync(registryPath, "utf8"));
const entries = [];
for (const entry of registry.interfaces ?? []) {
  if (entry.transport !== "ide_command" || !appliesToVsCodeFamily(entry)) continue;
  const required = (entry.requires?.capabilities ?? [])
    .filter((capability) => String(capability).startsWith("command:"))
    .map((capability) => String(capability).slice("command:".length));
  const commands = [...new Set([...(entry.steps ?? []).map((step) => step.command), ...required])];
  if (commands.length > 0) entries.push({ id: entry.id, commands });
}
const all = [...new Set(entries.flatMap((entry) => entry.commands))].sort();

const text = `/** The IDE commands of the built-in registry's VS Code-family entries: generated from registry/default.yaml by scripts/generate-catalog.mjs — do not edit; run \`npm run generate-catalog\`. */

/** Each catalog entry, and the commands its steps run or it requires. */
export const CATALOG_ENTRIES: readonly { id: string; commands: readonly string[] }[] = ${JSON.stringify(entries, null, 2)};

/** Every command above, once: the extension's default allow-list and the commands it reports as capabilities. */
export const CATALOG_COMMANDS: readonly string[] = ${JSON.stringify(all, null, 2)};
`;

if (process.argv.includes("--check")) {
  const committed = readFileSync(outPath, "utf8");
  if (committed !== text) {
    console.error(
      "src/catalog.generated.ts is stale: registry/default.yaml changed. Run `npm run generate-catalog` and commit the result.",
    );
    process.exit(1);
  }
} else {
  writeFileSync(outPath, text);
  console.log(`wrote ${outPath}`);
}
