// The plugin's latency against a real, warm `vaultctx serve` on the 10k-block synthetic
// vault of benchmarks/select_bench.py (random unit vectors: the scan costs the same).
//
//   node bench/latency.mjs [--notes 100] [--queries 60]      (npm run bench; make bench)
//
// Measures, through the plugin's own code (VaultctxClient, PanelController, SearchModal):
// - panel: from the active note changing to the panel rendered with its related notes;
// - search: each keystroke's /select round trip, and from the last keystroke to the results
//   shown (the modal's debounce included);
// - main.js's size and what onload() costs (no request, no process).
// Targets (issue 25): panel p50 <= 100 ms, search p50 <= 50 ms per keystroke request,
// main.js <= 150 KB. Needs the venv ($VAULTCTX_BIN, as `make bench` passes it).

import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

import esbuild from "esbuild";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.resolve(HERE, "..");
const REPO = path.resolve(PLUGIN, "../..");

function option(name, fallback) {
	const at = process.argv.indexOf(`--${name}`);
	return at > 0 ? Number(process.argv[at + 1]) : fallback;
}

const vaultctx = process.env.VAULTCTX_BIN || path.join(REPO, ".venv", "bin", "vaultctx");
const python = path.join(path.dirname(vaultctx), "python");
const notes = option("notes", 100);
const queries = option("queries", 60);

// The vault: generated and indexed once (cached under the temp folder), with the queries.
const PREPARE = `
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, "benchmarks")
from common import offline_env
offline_env()
from select_bench import build
from synthvault import generate_queries
from vaultctx import Workspace
root = Path(tempfile.gettempdir()) / "vaultctx-bench" / "obsidian-plugin" / "10000"
build(root, 10_000, real_vectors=False)
with Workspace.open(root) as ws:
    paths = [row[0] for row in ws.db.connect().execute("SELECT path FROM notes ORDER BY id")]
    blocks = ws.status().blocks
print(json.dumps({"vault": str(root), "paths": paths, "blocks": blocks,
                  "queries": generate_queries(${queries}, seed=1)}))
`;
console.log("preparing the 10k-block vault (cached after the first run)…");
const prepared = JSON.parse(
	execFileSync(python, ["-c", PREPARE], { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }),
);

const work = mkdtempSync(path.join(tmpdir(), "vaultctx-plugin-bench-"));
const bundle = path.join(work, "run.cjs");
await esbuild.build({
	entryPoints: [path.join(HERE, "run.ts")],
	bundle: true,
	platform: "node",
	format: "cjs",
	target: "node20",
	outfile: bundle,
	alias: { obsidian: path.join(PLUGIN, "test", "obsidian-stub.ts") },
	external: ["jsdom"],
	logLevel: "warning",
});
const config = path.join(work, "config.json");
writeFileSync(config, JSON.stringify({ ...prepared, vaultctx, notes, work, plugin: PLUGIN }));
execFileSync(process.execPath, [bundle, config], {
	stdio: "inherit",
	env: { ...process.env, NODE_PATH: path.join(PLUGIN, "node_modules") },
});
