/** Generates src/protocol/types.generated.ts from docs/protocol.schema.json (the Rust types' schema); `--check` fails when the committed file is stale. */
import { compile } from "json-schema-to-typescript";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const schemaPath = join(here, "..", "..", "..", "docs", "protocol.schema.json");
const outPath = join(here, "..", "src", "protocol", "types.generated.ts");

/**
 * schemars writes a tagged variant as `{$ref, properties: {type: {const}}}`; the generator
 * would keep only the sibling properties. Rewrite every such node as
 * `allOf: [{$ref}, {the rest}]` so the referenced fields survive.
 */
function splitRefSiblings(node) {
  if (Array.isArray(node)) return node.map(splitRefSiblings);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) out[key] = splitRefSiblings(value);
  const siblings = Object.keys(out).filter((k) => !["$ref", "description", "title"].includes(k));
  if (out.$ref && siblings.length > 0) {
    const rest = {};
    for (const key of siblings) rest[key] = out[key];
    const rewritten = { allOf: [{ $ref: out.$ref }, rest] };
    if (out.description) rewritten.description = out.description;
    return rewritten;
  }
  return out;
}

const schema = splitRefSiblings(JSON.parse(readFileSync(schemaPath, "utf8")));
const banner =
  "/** Mirrors protocol/src/ (Rust): generated from docs/protocol.schema.json by scripts/generate-types.mjs — do not edit; run `npm run generate-types`. */";
const types = await compile(schema, "Envelope", {
  bannerComment: banner,
  additionalProperties: false,
  strictIndexSignatures: true,
  style: { singleQuote: false, printWidth: 100 },
});
// The message type names, in the schema's order: the decoder's list of known types.
const messageTypes = schema.oneOf
  .map((branch) => JSON.stringify(branch.allOf ? branch.allOf[1].properties.type.const : branch.properties.type.const))
  .join(",\n  ");
const generated = `${types}
/** Every message type of this protocol version, as the schema lists them. */
export const MESSAGE_TYPES: readonly string[] = [
  ${messageTypes},
];
`;

if (process.argv.includes("--check")) {
  let committed = "";
  try {
    committed = readFileSync(outPath, "utf8");
  } catch {
    // Missing counts as stale.
  }
  if (committed !== generated) {
    console.error(`${outPath} is stale: run \`npm run generate-types\` and commit it`);
    process.exit(1);
  }
  console.log("protocol types are current");
} else {
  writeFileSync(outPath, generated);
  console.log(`wrote ${outPath}`);
}
