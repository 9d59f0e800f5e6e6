// @vitest-environment node
// The panel in a real browser: its DOM and the plugin's styles.css, filled with a real
// server's /related answer (examples/vault indexed with embeddings), rendered by headless Chromium (Debian's /usr/bin/chromium through
// playwright-core). Assertions are on what a person sees; the screenshot is written to
// test-output/panel.png.

import { mkdirSync, readFileSync, writeFileSync } from "fs";
import * as path from "path";

import esbuild from "esbuild";
import { Browser, chromium, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { VaultctxClient } from "../../src/client";
import { groupByNote, PanelState } from "../../src/render";
import { exampleVault, RealServer } from "../integration/real-server";
import { requests } from "../obsidian-stub";

const HERE = path.resolve(__dirname, "../..");
export const OUTPUT = path.join(HERE, "test-output");
export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_ARGS = [
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--no-first-run",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
];
const OPEN = "Pests and Diseases/Varroa Mites.md";

let server: RealServer;
let browser: Browser;
let page: Page;
let state: PanelState & { kind: "results" };

async function renderBundle(): Promise<string> {
	const result = await esbuild.build({
		entryPoints: [path.join(HERE, "src/render.ts")],
		bundle: true,
		format: "iife",
		globalName: "VaultctxRender",
		target: "es2018",
		write: false,
	});
	return result.outputFiles[0].text;
}

function pageHtml(bundle: string): string {
	const theme = readFileSync(path.join(__dirname, "obsidian-theme.css"), "utf8");
	const styles = readFileSync(path.join(HERE, "styles.css"), "utf8");
	return `<!doctype html><html><head><meta charset="utf-8">
<style>${theme}</style><style>${styles}</style></head>
<body class="theme-dark"><div class="workspace-split">
<div class="workspace-editor"><h1>Varroa Mites</h1><div class="note-text"></div></div>
<div class="workspace-leaf"><div class="view-header">Related notes</div><div class="view-content"></div></div>
</div><script>${bundle}</script></body></html>`;
}

beforeAll(async () => {
	server = await RealServer.start(exampleVault(undefined, true)); // lexical, vector and graph
	const client = new VaultctxClient({ vaultPath: server.vault, timeoutMs: () => 10_000 });
	await client.related(OPEN, { k: 8 }); // warm: the first request also checks the server
	const started = performance.now();
	const answer = await client.related(OPEN, { k: 8 });
	const ms = performance.now() - started;
	state = { kind: "results", note: "Varroa Mites", entries: groupByNote(answer.candidates, OPEN, 8), ms };
	browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
	page = await browser.newPage({ viewport: { width: 1000, height: 1000 }, deviceScaleFactor: 1 });
	// The page loads nothing from anywhere: every request it tries fails the test.
	const outside: string[] = [];
	page.on("request", (request) => outside.push(request.url()));
	await page.setContent(pageHtml(await renderBundle()), { waitUntil: "load" });
	// The open note's first lines in the editor pane, as text.
	const lines = readFileSync(path.join(server.vault, OPEN), "utf8")
		.split("\n")
		.filter((line) => line.trim() && !line.startsWith("#") && !line.startsWith("---") && !/^\w+:/.test(line))
		.slice(0, 7);
	await page.evaluate((text) => {
		const pane = document.querySelector(".note-text") as HTMLElement;
		for (const line of text) pane.appendChild(document.createElement("p")).textContent = line;
	}, lines);
	await page.evaluate((panelState) => {
		const w = window as unknown as {
			VaultctxRender: typeof import("../../src/render");
			events: Array<{ kind: string; path: string }>;
		};
		w.events = [];
		w.VaultctxRender.renderPanel(document.querySelector(".view-content") as HTMLElement, panelState, {
			open: (candidate) => w.events.push({ kind: "open", path: candidate.path }),
			hover: (candidate) => w.events.push({ kind: "hover", path: candidate.path }),
		});
	}, state);
	expect(outside.filter((url) => !url.startsWith("about:") && !url.startsWith("data:"))).toEqual([]);
}, 120_000);

afterAll(async () => {
	await browser?.close();
	await server?.stop();
	expect(new Set(requests.map((r) => new URL(r.url).hostname))).toEqual(new Set(["127.0.0.1"]));
});

describe("the panel in Chromium", () => {
	it("shows each related note with its heading path, snippet, badges and score", async () => {
		expect(state.entries.length).toBeGreaterThanOrEqual(5);
		const results = page.locator(".vaultctx-result");
		expect(await results.count()).toBe(state.entries.length);
		await expect(page.locator(".vaultctx-header-note").textContent()).resolves.toBe("Varroa Mites");
		for (let i = 0; i < state.entries.length; i++) {
			const result = results.nth(i);
			const title = result.locator(".vaultctx-result-title");
			expect(await title.isVisible()).toBe(true);
			expect(await title.textContent()).toBe(state.entries[i].title);
			expect(await result.locator(".vaultctx-score").isVisible()).toBe(true);
			expect(await result.locator(".vaultctx-badge").first().isVisible()).toBe(true);
		}
		const titles = await page.locator(".vaultctx-result-title").allTextContents();
		expect(titles).not.toContain("Varroa Mites"); // never the open note
		expect(await page.locator(".vaultctx-result-snippet").first().isVisible()).toBe(true);
	});

	it("fits the sidebar: nothing spills sideways, snippets stop at three lines", async () => {
		const layout = await page.evaluate(() => {
			const leaf = document.querySelector(".workspace-leaf") as HTMLElement;
			const content = document.querySelector(".view-content") as HTMLElement;
			const right = leaf.getBoundingClientRect().right;
			const overflowing = [...content.querySelectorAll("*")].filter((el) => el.getBoundingClientRect().right > right + 0.5);
			const snippets = [...content.querySelectorAll(".vaultctx-result-snippet")].map((el) => {
				const lineHeight = parseFloat(getComputedStyle(el).lineHeight);
				return el.getBoundingClientRect().height / lineHeight;
			});
			const badge = content.querySelector(".vaultctx-badge-graph, .vaultctx-badge-lexical") as HTMLElement;
			return {
				scrollWidth: content.scrollWidth,
				clientWidth: content.clientWidth,
				overflowing: overflowing.map((el) => el.className),
				maxLines: Math.max(...snippets),
				badgeColor: getComputedStyle(badge).color,
				titleColor: getComputedStyle(content.querySelector(".vaultctx-result-title")!).color,
			};
		});
		expect(layout.overflowing).toEqual([]);
		expect(layout.scrollWidth).toBeLessThanOrEqual(layout.clientWidth);
		expect(layout.maxLines).toBeLessThanOrEqual(3.05);
		expect(layout.titleColor).toBe("rgb(168, 139, 250)"); // the theme's accent reached the title
		expect(layout.badgeColor).not.toBe(layout.titleColor);
	});

	it("answers a click and a hover on a result", async () => {
		const second = page.locator(".vaultctx-result").nth(1);
		await second.hover();
		await second.click();
		const events = await page.evaluate(() => (window as unknown as { events: unknown[] }).events);
		expect(events).toEqual(
			expect.arrayContaining([
				{ kind: "hover", path: state.entries[1].path },
				{ kind: "open", path: state.entries[1].path },
			]),
		);
	});

	it("is photographed for the README", async () => {
		await page.mouse.move(0, 0);
		mkdirSync(OUTPUT, { recursive: true });
		const file = path.join(OUTPUT, "panel.png");
		const png = await page.screenshot({ path: file, fullPage: false });
		expect(png.length).toBeGreaterThan(10_000);
		writeFileSync(path.join(OUTPUT, "panel-state.json"), JSON.stringify(state, null, 2));
	});
});
