import { afterEach, beforeEach, describe, expect, it } from "vitest";

import VaultctxPlugin from "../../src/main";
import { ContextView, VIEW_TYPE } from "../../src/panel";
import { SearchModal } from "../../src/search";
import { candidate, fakeVault, FakeVault, resetStub, selection, serveFake, until } from "../helpers";
import type { Candidate } from "../../src/types";
import { App, clipboard, Modal, notices, requests, response, SuggestModal, TFile } from "../obsidian-stub";

let vault: FakeVault;
let app: App;
let plugin: VaultctxPlugin;

async function load(): Promise<VaultctxPlugin> {
	app = new App(vault.root);
	plugin = new VaultctxPlugin(app as never, { id: "vaultctx", version: "0.1.0" } as never);
	await plugin.onload();
	return plugin;
}

const stub = () => plugin as unknown as import("../obsidian-stub").Plugin;

beforeEach(() => {
	resetStub();
	clipboard.length = 0;
	vault = fakeVault(43210);
	serveFake(vault, {
		"POST /related": (_, body) => response(200, selection(body.note, [candidate("Near.md")])),
		"POST /select": (_, body) => response(200, selection(body.query, [candidate("Hit.md", { heading: "Here" })])),
		"POST /context": () =>
			response(200, {
				items: [{ id: "b:1", kind: "block", path: "Hit.md", heading: "Here", text: "Passage." }],
				token_count: 42,
				budget: 2000,
				gate: "deterministic",
				context_hash: "0123456789abcdef",
			}),
	});
});
afterEach(() => {
	stub().unload();
	resetStub();
});

describe("at Obsidian's start-up", () => {
	it("the plugin only registers its view, commands, settings and status bar: no request", async () => {
		await load();
		const s = stub();
		expect([...s.commands.keys()]).toEqual([
			"open-related-notes",
			"search",
			"copy-context",
			"start-server",
			"stop-server",
			"clear-focus",
			"check-connection",
		]);
		expect(app.workspace.viewFactories.has(VIEW_TYPE)).toBe(true);
		expect(s.hoverSources.get(VIEW_TYPE)).toEqual({ display: "vaultctx related notes", defaultMod: false });
		expect(s.settingTabs).toHaveLength(1);
		expect(s.statusBarItems[0].textContent).toBe("vaultctx");
		expect(requests).toEqual([]);
		expect(plugin.server.running).toBe(false);
		expect(app.workspace.listeners("file-open")).toBe(0); // the panel listens, once shown
		expect(app.workspace.listeners("quit")).toBe(1); // to stop a server it started
	});
});

describe("the status bar", () => {
	it("says connected, indexing while the server's watcher works, and not running", async () => {
		await load();
		let indexing = true;
		serveFake(vault, {
			"GET /status": () => response(200, { notes: 3, server: { pid: 4242, watching: true, indexing } }),
			"POST /related": (_, body) => response(200, selection(body.note, [])),
		});
		await plugin.refreshStatus();
		expect(plugin.statusText).toBe("vaultctx: indexing…");
		await plugin.client.related("a.md");
		expect(plugin.statusText).toBe("vaultctx: indexing…"); // until /status says otherwise
		indexing = false;
		await plugin.refreshStatus();
		expect(plugin.statusText).toBe("vaultctx: connected");
		serveFake(vault, { "GET /status": async () => Promise.reject(new Error("connect ECONNREFUSED")) });
		await plugin.refreshStatus();
		expect(plugin.statusText).toBe("vaultctx: not running");
		expect(notices).toHaveLength(1);
	});
});

describe("the panel", () => {
	it("opens in the right sidebar and shows the open note's related notes", async () => {
		await load();
		app.workspace.activeFile = new TFile("Open.md");
		await stub().runCommand("open-related-notes");
		const leaf = app.workspace.getLeavesOfType(VIEW_TYPE)[0];
		const view = leaf.view as ContextView;
		await until(() => view.controller?.state.kind === "results", "results");
		expect(view.contentEl.querySelector(".vaultctx-result-title")!.textContent).toBe("Near");
		expect(stub().statusBarItems[0].textContent).toBe("vaultctx: connected");

		app.workspace.openFile("Other.md");
		await until(() => requests.filter((r) => r.url.endsWith("/related")).length === 2, "second request");

		(view.contentEl.querySelector(".vaultctx-result") as HTMLElement).click();
		expect(app.workspace.opened).toEqual([
			{ linktext: "Near#Notes", sourcePath: "Other.md", newLeaf: false, state: undefined },
		]);

		const hovers: unknown[] = [];
		app.workspace.on("hover-link", (info: unknown) => hovers.push(info));
		const item = view.contentEl.querySelector(".vaultctx-result") as HTMLElement;
		item.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
		expect(hovers).toMatchObject([{ source: VIEW_TYPE, linktext: "Near#Notes", sourcePath: "Other.md", targetEl: item }]);

		leaf.detach();
		expect(app.workspace.listeners("file-open")).toBe(0);
	});
});

describe("search as you type", () => {
	it("shows /select's passages and opens the chosen one at its heading", async () => {
		await load();
		stub().runCommand("search");
		const modal = Modal.opened[Modal.opened.length - 1] as SearchModal & SuggestModal<Candidate>;
		expect(modal).toBeInstanceOf(SearchModal);
		await modal.type("varroa");
		expect(modal.shown.map((c) => c.path)).toEqual(["Hit.md"]);
		modal.enter();
		expect(app.workspace.opened[0].linktext).toBe("Hit#Here");
	});
});

describe("search with no good match", () => {
	it("says no good match above the closest passage instead of presenting it as the answer", async () => {
		await load();
		serveFake(vault, {
			"POST /select": (_, body) =>
				response(200, {
					...selection(body.query, [candidate("Far.md"), candidate("Farther.md")]),
					confidence: 0.02,
					no_good_match: true,
				}),
		});
		stub().runCommand("search");
		const modal = Modal.opened[Modal.opened.length - 1] as SearchModal & SuggestModal<Candidate>;
		await modal.type("zorblat quexil");
		expect(modal.shown.map((c) => c.path)).toEqual(["Far.md", "Farther.md"]);
		const notices = [...modal.resultContainerEl.querySelectorAll(".vaultctx-no-match")];
		expect(notices.map((n) => n.textContent)).toEqual(["No good match; closest:"]);
		expect(notices[0].closest(".suggestion-item")!.textContent).toContain("Far");

		serveFake(vault, {
			"POST /select": (_, body) => response(200, { ...selection(body.query, [candidate("Hit.md")]), no_good_match: false }),
		});
		await modal.type("varroa mites"); // a real answer: no such notice
		expect(modal.resultContainerEl.querySelector(".vaultctx-no-match")).toBeNull();
	});
});

describe("copy context", () => {
	it("copies the selection's context as Markdown with links, and says how much", async () => {
		await load();
		app.workspace.activeEditor = { editor: { getSelection: () => "  when to treat?  " } };
		await stub().runCommand("copy-context");
		await until(() => clipboard.length === 1, "the clipboard");
		expect(clipboard[0]).toContain("> when to treat?");
		expect(clipboard[0]).toContain("### [[Hit#Here]]");
		expect(notices).toEqual(["vaultctx: copied the context of 1 note (42 tokens) to the clipboard."]);
	});

	it("asks for a question when nothing is selected", async () => {
		await load();
		stub().runCommand("copy-context");
		const form = document.querySelector("form.vaultctx-question") as HTMLFormElement;
		(form.querySelector("input") as HTMLInputElement).value = "queen";
		form.dispatchEvent(new Event("submit", { cancelable: true }));
		await until(() => clipboard.length === 1, "the clipboard");
		const body = requests.find((r) => r.url.endsWith("/context"))!.body as string;
		expect(JSON.parse(body)).toEqual({ query: "queen", k: 30, no_vectors: false });
		expect(document.querySelector("form.vaultctx-question")).toBeNull(); // the modal closed
	});
});

describe("clearing the focus", () => {
	it("asks the server to forget the open notes and says what still counts", async () => {
		await load();
		serveFake(vault, {
			"DELETE /focus": () =>
				response(200, {
					notes: [{ path: "Edited.md", weight: 0.5, how: "edited", at: "2026-01-01T00:00:00+00:00" }],
					half_life_hours: 24,
					cleared: 2,
				}),
		});
		await stub().runCommand("clear-focus");
		await until(() => notices.length === 1, "the notice");
		expect(requests.filter((r) => r.url.endsWith("/focus")).map((r) => r.method)).toEqual(["DELETE"]);
		expect(notices).toEqual([
			"vaultctx: forgot 2 open notes; notes edited lately still count a little: Edited.md.",
		]);
	});

	it("says so when the server cannot be reached", async () => {
		await load();
		serveFake(vault, { "DELETE /focus": async () => Promise.reject(new Error("connect ECONNREFUSED")) });
		await stub().runCommand("clear-focus");
		await until(() => notices.length === 1, "the notice");
		expect(notices[0]).not.toContain("forgot");
	});
});

