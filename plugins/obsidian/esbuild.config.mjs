// Bundles the plugin: src/main.ts -> main.js, beside manifest.json and styles.css, in the
// folder the Python package ships (`vaultctx obsidian install` copies it into a vault).
//   node esbuild.config.mjs [OUT_DIR]     (default: ../../src/vaultctx/obsidian/plugin)
import { copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

import builtins from "builtin-modules";
import esbuild from "esbuild";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SHIPPED = path.resolve(HERE, "../../src/vaultctx/obsidian/plugin");
export const STATIC_FILES = ["manifest.json", "styles.css"];

/** The options of the one build: a test builds with them again and compares. */
export const buildOptions = {
  absWorkingDir: HERE,
  entryPoints: ["src/main.ts"],
  bundle: true,
  external: [
    "obsidian",
    "electron",
    "@codemirror/autocomplete",
    "@codemirror/collab",
    "@codemirror/commands",
    "@codemirror/language",
    "@codemirror/lint",
    "@codemirror/search",
    "@codemirror/state",
    "@codemirror/view",
    "@lezer/common",
    "@lezer/highlight",
    "@lezer/lr",
    ...builtins,
  ],
  format: "cjs",
  target: "es2018",
  platform: "browser",
  logLevel: "warning",
  sourcemap: false,
  treeShaking: true,
  minify: false,
  legalComments: "none",
  banner: { js: "/* vaultctx Obsidian plugin: built by esbuild from plugins/obsidian/src (npm run build) */" },
};

export async function build(outDir) {
  mkdirSync(outDir, { recursive: true });
  await esbuild.build({ ...buildOptions, outfile: path.join(outDir, "main.js") });
  for (const name of STATIC_FILES) copyFileSync(path.join(HERE, name), path.join(outDir, name));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = path.resolve(process.argv[2] ?? SHIPPED);
  build(outDir).then(
    () => console.log(`built ${path.relative(process.cwd(), outDir) || "."}/main.js`),
    () => process.exit(1),
  );
}
