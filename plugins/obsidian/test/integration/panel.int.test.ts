// The plugin against a real `vaultctx serve` of a copy of examples/vault.

import { writeFileSync } from "fs";
import * as path from "path";

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import VaultctxPlugin from "../../src/main";
import { ContextView, VIEW_TYPE } from "../../src/panel";
import { linkTarget } from "../../src/render";
import { SearchModal } from "../../src/search";
import type { Candidate } from "../../src/types";
import { until } from "../helpers";
import { App, clipboard, Modal, notices, Plugin, requests, TFile } from "../obsidian-stub";
import { RealServer } from "./real-server";

const OPEN = "Pests and Diseases/Varroa Mites.md";
let server: RealServer;
let app: App;
let plugin: VaultctxPlugin;
let view: ContextView;

const titles = () => [...view.contentEl.querySelectorAll(".vaultctx-result-title")].map((e) => e.textContent);
const shown = () => [...view.contentEl.querySelectorAll<HTMLElement>(".vaultctx-result")].map((e) => e.dataset.path);

beforeAll(async () => {
	server = await RealServer.start();
	app = new App(server.vault);
	plugin = new VaultctxPlugin(app as never, { id: "vaultctx", version: "0.1.0" } as never);
	await plugin.onload();
	app.workspace.activeFile = null;
	await plugin.openPanel();
	view = app.workspace.getLeavesOfType(VIEW_TYPE)[0].view as ContextView;
});

afterAll(async () => {
	(plugin as unknown as Plugin)?.unload();
	await server?.stop();
	// Every request the plugin made in this file went to the loopback address.
	expect(requests.length).toBeGreaterThan(5);
	expect(new Set(requests.map((r) => new URL(r.url).hostname))).toEqual(new Set(["127.0.0.1"]));
});

beforeEach(() => {
	notices.length = 0;
});

describe("the panel, filled by a real server", () => {
	it("shows the notes that matter for the note just opened, never the note itself", async () => {
		app.workspace.openFile(OPEN);
		await until(() => view.controller?.state.kind === "results", "the panel's results");
		expect(titles().length).toBeGreaterThanOrEqual(5);
		expect(shown()).not.toContain(OPEN);
		// Notes the open note links to, found through the link graph and their words.
		expect(titles()).toEqual(expect.arrayContaining(["Thymol Treatment", "Mite Counting Methods"]));
		const badges = [...view.contentEl.querySelectorAll(".vaultctx-badge")].map((b) => b.textContent);
		expect(badges.some((b) => b!.startsWith("graph #"))).toBe(true);
		expect(badges.some((b) => b!.startsWith("lexical #"))).toBe(true);
		expect(view.contentEl.querySelector(".vaultctx-header-note")!.textContent).toBe("Varroa Mites");
		expect(notices).toEqual([]);
		expect(plugin.notifier).toBeDefined();
	});

	it("shows a note saved during the test once the server has indexed it", async () => {
		app.workspace.openFile(OPEN);
		await until(() => view.controller?.state.kind === "results", "results");
		const fresh = "Pests and Diseases/Sugar Roll Test.md";
		expect(shown()).not.toContain(fresh);
		writeFileSync(
			path.join(server.vault, fresh),
			"# Sugar Roll Test\n\nA quick count of varroa mites without killing bees: roll half a cup of " +
				"bees in icing sugar and count the mites that fall. Compare with [[Varroa Mites]] thresholds " +
				"before any thymol or oxalic treatment.\n",
		);
		app.vault.trigger("create", new TFile(fresh));
		await until(() => shown().includes(fresh), "the saved note in the panel", 20_000);
	});

	it("opens a result at its heading", async () => {
		await until(() => titles().length > 0, "results");
		const first = view.contentEl.querySelector<HTMLElement>(".vaultctx-result")!;
		app.workspace.opened.length = 0;
		first.click();
		const [opened] = app.workspace.opened;
		expect(opened.sourcePath).toBe(OPEN);
		expect(opened.linktext.startsWith(first.dataset.path!.replace(/\.md$/, ""))).toBe(true);
	});
});

describe("search as you type, against the real server", () => {
	it("answers the last keystroke, and opens the chosen passage", async () => {
		plugin.openSearch();
		const modal = Modal.opened[Modal.opened.length - 1] as unknown as SearchModal;
		const before = requests.filter((r) => r.url.endsWith("/select")).length;
		const typing = ["q", "qu", "que", "quee", "queen", "queen c", "queen cells"].map((text) =>
			(modal as unknown as { type(v: string): Promise<unknown[]> }).type(text),
		);
		await Promise.all(typing);
		const shownPaths = (modal as unknown as { shown: Array<{ path: string }> }).shown.map((c) => c.path);
		expect(shownPaths.length).toBeGreaterThan(0);
		expect(shownPaths.slice(0, 5).some((p) => /queen/i.test(p))).toBe(true);
		const sent = requests.filter((r) => r.url.endsWith("/select")).slice(before);
		expect(sent.length).toBeLessThanOrEqual(2); // the first keystroke and the last
		expect(JSON.parse(sent[sent.length - 1].body as string).query).toBe("queen cells");
		app.workspace.opened.length = 0;
		(modal as unknown as { enter(): void }).enter(); // the first passage is selected
		const first = (modal as unknown as { shown: Candidate[] }).shown[0];
		expect(app.workspace.opened[0].linktext).toBe(linkTarget(first).linktext);
		expect(app.workspace.opened[0].linktext.startsWith(first.path.replace(/\.md$/, ""))).toBe(true);
	});
});

describe("copy context, against the real server", () => {
	it("copies Markdown with [[links]] to the sources and says how many notes and tokens", async () => {
		clipboard.length = 0;
		app.workspace.activeEditor = { editor: { getSelection: () => "when should I treat for varroa mites" } };
		(plugin as unknown as Plugin).runCommand("copy-context");
		await until(() => clipboard.length === 1, "the clipboard");
		app.workspace.activeEditor = null;
		const headings = clipboard[0].match(/^### \[\[[^\]]+\]\]$/gm) ?? [];
		expect(headings.length).toBeGreaterThan(1);
		const sources = clipboard[0].match(/^Sources: (.*)$/m)![1].split(", ");
		expect(clipboard[0]).toMatch(/^## Context from my notes\n\n> when should I treat for varroa mites\n/);
		expect(notices).toHaveLength(1);
		const [, notes, tokens] = notices[0].match(/copied the context of (\d+) notes? \(([\d,]+) tokens\)/)!;
		expect(Number(notes)).toBe(sources.length);
		expect(Number(tokens.replace(/,/g, ""))).toBeGreaterThan(0);
	});
});
