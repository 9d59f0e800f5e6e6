// The measuring half of bench/latency.mjs, bundled with the obsidian stand-in (whose
// requestUrl is real HTTP through Node) and run in plain Node with a jsdom document.

import { ChildProcess, spawn } from "child_process";
import { readFileSync, statSync } from "fs";
import * as path from "path";

import { VaultctxClient } from "../src/client";
import { readServerFile } from "../src/discovery";
import VaultctxPlugin from "../src/main";
import { Notifier } from "../src/notify";
import { PanelController } from "../src/panel";
import { SearchModal } from "../src/search";
import { App, requests, SuggestModal } from "../test/obsidian-stub";
import type { Candidate } from "../src/types";

interface Config {
	vault: string;
	paths: string[];
	blocks: number;
	queries: string[];
	vaultctx: string;
	notes: number;
	work: string;
	plugin: string;
}

const PANEL_P50_MS = 100;
const SEARCH_P50_MS = 50;
const MAIN_JS_KB = 150;

function installDom(): void {
	const { JSDOM } = require("jsdom") as { JSDOM: new (html: string) => { window: Window } };
	const { window } = new JSDOM("<!doctype html><body></body>");
	const g = globalThis as Record<string, unknown>;
	for (const name of ["window", "document", "HTMLElement", "Event", "MouseEvent", "KeyboardEvent"]) {
		g[name] = name === "window" ? window : (window as unknown as Record<string, unknown>)[name];
	}
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function stats(values: number[]): { p50: number; p95: number; n: number } {
	const sorted = [...values].sort((a, b) => a - b);
	const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.round((q / 100) * (sorted.length - 1))))];
	return { p50: round(at(50)), p95: round(at(95)), n: values.length };
}

function round(x: number): number {
	return Math.round(x * 10) / 10;
}

async function startServer(config: Config): Promise<ChildProcess> {
	const env = {
		...process.env,
		VAULTCTX_CONFIG_DIR: path.join(config.work, "config"),
		VAULTCTX_ACCOUNT_DIR: path.join(config.work, "account"),
		HF_HUB_OFFLINE: "1",
		LITELLM_LOCAL_MODEL_COST_MAP: "True",
		TOKENIZERS_PARALLELISM: "false",
	};
	const child = spawn(config.vaultctx, ["serve", config.vault, "--port", "0"], { env, stdio: "inherit" });
	const deadline = Date.now() + 120_000;
	for (;;) {
		const info = await readServerFile(config.vault);
		if (info && info.pid === child.pid) return child;
		if (child.exitCode !== null || Date.now() > deadline) throw new Error("vaultctx serve did not start");
		await sleep(20);
	}
}

/** Time from the note change to the panel rendered with that note's related notes. */
async function panelLatency(config: Config, client: VaultctxClient): Promise<{ update: number[]; request: number[] }> {
	const root = document.createElement("div");
	let waiting: { path: string; resolve: (ms: number) => void } | null = null;
	const controller = new PanelController(root, {
		client,
		options: () => ({ k: 10, noVectors: false }),
		notifier: new Notifier(),
		handlers: { open: () => undefined },
		onRendered: (state, sinceChangeMs) => {
			if (waiting && state.kind !== "loading" && controller.answered === waiting.path) {
				if (state.kind !== "results") throw new Error(`panel: ${JSON.stringify(state)}`);
				waiting.resolve(sinceChangeMs);
			}
		},
	});
	const step = Math.max(1, Math.floor(config.paths.length / config.notes));
	const sample = config.paths.filter((_, i) => i % step === 0).slice(0, config.notes);
	const update: number[] = [];
	const request: number[] = [];
	for (const notePath of sample) {
		const rendered = new Promise<number>((resolve) => (waiting = { path: notePath, resolve }));
		const name = path.basename(notePath, ".md");
		controller.noteChanged({ path: notePath, basename: name, extension: "md" });
		update.push(await rendered);
		if (controller.state.kind === "results" && controller.state.ms !== undefined) request.push(controller.state.ms);
		const shown = [...root.querySelectorAll<HTMLElement>(".vaultctx-result")].map((el) => el.dataset.path);
		if (shown.includes(notePath)) throw new Error("the open note was shown");
		if (!shown.length) throw new Error(`no related notes for ${notePath}`);
		await sleep(260); // a user reading: the next change is not coalesced with this one
	}
	controller.close();
	return { update, request };
}

/** Each keystroke's /select, as the modal sends it, and the last keystroke to results shown. */
async function searchLatency(config: Config, client: VaultctxClient): Promise<{ keystroke: number[]; shown: number[] }> {
	const keystroke: number[] = [];
	for (const query of config.queries) {
		for (let end = 3; end <= query.length; end += 3) {
			const prefix = query.slice(0, end);
			const started = performance.now();
			await client.select(prefix, { k: 20 });
			keystroke.push(performance.now() - started);
		}
	}
	const shown: number[] = [];
	const app = new App(config.vault);
	for (const query of config.queries.slice(0, 30)) {
		const modal = new SearchModal(app as never, {
			client,
			notifier: new Notifier(),
			options: () => ({ k: 10, noVectors: false }),
			open: () => undefined,
		}) as unknown as SuggestModal<Candidate>;
		let last: Promise<unknown> = Promise.resolve();
		let lastAt = 0;
		for (let end = 1; end <= query.length; end++) {
			lastAt = performance.now();
			last = modal.type(query.slice(0, end));
			await sleep(60); // a quick typist: 60 ms between keys
		}
		await last;
		shown.push(performance.now() - lastAt);
	}
	return { keystroke, shown };
}

async function startup(config: Config): Promise<{ onloadMs: number; requests: number }> {
	const before = requests.length;
	const app = new App(config.vault);
	const plugin = new VaultctxPlugin(app as never, { id: "vaultctx", version: "0.1.0" } as never);
	const started = performance.now();
	await plugin.onload();
	const onloadMs = performance.now() - started;
	return { onloadMs: round(onloadMs), requests: requests.length - before };
}

async function main(): Promise<void> {
	const config = JSON.parse(readFileSync(process.argv[2], "utf8")) as Config;
	installDom();
	const mainJs = statSync(path.resolve(config.plugin, "../../src/vaultctx/obsidian/plugin/main.js")).size;
	const start = await startup(config);
	const server = await startServer(config);
	try {
		const client = new VaultctxClient({ vaultPath: config.vault, timeoutMs: () => 60_000 });
		for (const p of config.paths.slice(0, 20)) await client.related(p, { touch: false });
		for (const q of config.queries.slice(0, 20)) await client.select(q, { k: 20 });
		const panel = await panelLatency(config, client);
		const search = await searchLatency(config, client);
		const figures = {
			blocks: config.blocks,
			main_js_kb: round(mainJs / 1024),
			onload_ms: start.onloadMs,
			onload_requests: start.requests,
			panel_update_ms: stats(panel.update),
			panel_request_ms: stats(panel.request),
			search_keystroke_ms: stats(search.keystroke),
			search_last_key_to_results_ms: stats(search.shown),
		};
		const line = (label: string, s: { p50: number; p95: number; n: number }) =>
			console.log(`${label.padEnd(46)} p50 ${String(s.p50).padStart(6)} ms   p95 ${String(s.p95).padStart(6)} ms   (n=${s.n})`);
		console.log(`\nvaultctx Obsidian plugin on ${config.blocks.toLocaleString("en-US")} blocks (warm server):`);
		line("panel updated after the note changes", figures.panel_update_ms);
		line("  of which the /related round trip", figures.panel_request_ms);
		line("search: one keystroke's /select round trip", figures.search_keystroke_ms);
		line("search: last keystroke to results (debounced)", figures.search_last_key_to_results_ms);
		console.log(`main.js ${figures.main_js_kb} KB; onload ${figures.onload_ms} ms, ${figures.onload_requests} requests`);
		const checks: Array<[string, boolean]> = [
			[`panel p50 <= ${PANEL_P50_MS} ms`, figures.panel_update_ms.p50 <= PANEL_P50_MS],
			[`search keystroke p50 <= ${SEARCH_P50_MS} ms`, figures.search_keystroke_ms.p50 <= SEARCH_P50_MS],
			[`main.js <= ${MAIN_JS_KB} KB`, figures.main_js_kb <= MAIN_JS_KB],
			["onload sends no request", figures.onload_requests === 0],
		];
		for (const [what, ok] of checks) console.log(`${ok ? "ok  " : "MISS"} ${what}`);
		console.log(JSON.stringify({ bench: "obsidian_plugin", ...figures }));
		process.exitCode = checks.every(([, ok]) => ok) ? 0 : 1;
	} finally {
		server.kill("SIGTERM");
	}
}

main().catch((error) => {
	console.error(error);
	process.exit(2);
});
