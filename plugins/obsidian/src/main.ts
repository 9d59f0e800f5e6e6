// The vaultctx plugin: registers its view, commands, settings and status-bar item, and does
// nothing else until it is used (no request, no process at Obsidian's start-up).

import { FileSystemAdapter, Keymap, Plugin, WorkspaceLeaf } from "obsidian";

import { VaultctxClient } from "./client";
import { askQuestion, copiedNotice, formatContext } from "./context";
import { Notifier } from "./notify";
import { ContextView, PanelHost, VIEW_TYPE } from "./panel";
import { asProblem, ServerProblem } from "./problems";
import { ServerProcess, splitArgs, StartFailed } from "./process";
import { linkTarget } from "./render";
import { SearchModal } from "./search";
import { DEFAULT_SETTINGS, loadSettings, VaultctxSettings, VaultctxSettingTab } from "./settings";
import { StatusBar } from "./status";
import type { Candidate, Focus } from "./types";

export default class VaultctxPlugin extends Plugin implements PanelHost {
	settings: VaultctxSettings = { ...DEFAULT_SETTINGS };
	readonly notifier = new Notifier();
	readonly server = new ServerProcess();
	private statusBar: StatusBar | null = null;
	private clientInstance: VaultctxClient | null = null;

	async onload(): Promise<void> {
		this.settings = loadSettings(await this.loadData());
		this.addSettingTab(new VaultctxSettingTab(this.app, this));
		this.registerView(VIEW_TYPE, (leaf) => new ContextView(leaf, this));
		this.registerHoverLinkSource(VIEW_TYPE, { display: "vaultctx related notes", defaultMod: false });
		this.statusBar = new StatusBar(this.addStatusBarItem(), () => void this.checkConnection());
		// A server this plugin started goes with Obsidian (best effort: quit may not run).
		this.registerEvent(this.app.workspace.on("quit", () => this.server.stop()));
		this.addRibbonIcon("waypoints", "vaultctx: related notes", () => void this.openPanel());
		this.addCommand({
			id: "open-related-notes",
			name: "Open the related notes panel",
			callback: () => void this.openPanel(),
		});
		this.addCommand({ id: "search", name: "Search the vault", callback: () => this.openSearch() });
		this.addCommand({
			id: "copy-context",
			name: "Copy context for an LLM (selection or a question)",
			callback: () => void this.copyContext(),
		});
		this.addCommand({ id: "start-server", name: "Start the server", callback: () => void this.startServer() });
		this.addCommand({
			id: "stop-server",
			name: "Stop the server this plugin started",
			checkCallback: (checking) => {
				if (!this.server.running) return false;
				if (!checking) this.stopServer();
				return true;
			},
		});
		this.addCommand({
			id: "clear-focus",
			name: "Forget which notes are open (clear the focus)",
			callback: () => void this.clearFocus(),
		});
		this.addCommand({
			id: "check-connection",
			name: "Check the connection to the server",
			callback: () => void this.checkConnection(),
		});
	}

	onunload(): void {
		this.server.stop(); // only what this plugin started
	}

	async saveSettings(): Promise<void> {
		await this.saveData(this.settings);
	}

	/** What the status-bar item says now. */
	get statusText(): string {
		return this.statusBar?.text ?? "";
	}

	/** The vault's folder on disk (desktop: a FileSystemAdapter). */
	get vaultPath(): string | null {
		const adapter = this.app.vault.adapter;
		return adapter instanceof FileSystemAdapter ? adapter.getBasePath() : null;
	}

	/** Made on first use. */
	get client(): VaultctxClient {
		if (this.clientInstance === null) {
			this.clientInstance = new VaultctxClient({
				vaultPath: this.vaultPath ?? "",
				timeoutMs: () => this.settings.timeoutSeconds * 1000,
				onLinkState: (state, problem) => {
					if (state === "connected") {
						if (this.statusBar?.state !== "indexing") this.statusBar?.set("connected");
					} else {
						this.statusBar?.set(state, problem?.message);
					}
				},
			});
		}
		return this.clientInstance;
	}

	async openPanel(): Promise<void> {
		const { workspace } = this.app;
		let leaf: WorkspaceLeaf | null = workspace.getLeavesOfType(VIEW_TYPE)[0] ?? null;
		if (leaf === null) {
			leaf = workspace.getRightLeaf(false);
			if (leaf === null) return;
			await leaf.setViewState({ type: VIEW_TYPE, active: true });
		}
		await workspace.revealLeaf(leaf);
	}

	openSearch(): void {
		new SearchModal(this.app, {
			client: this.client,
			notifier: this.notifier,
			options: () => ({ k: this.settings.k, noVectors: !this.settings.useVectors }),
			open: (candidate, event) => this.openCandidate(candidate, event, this.app.workspace.getActiveFile()?.path ?? ""),
		}).open();
	}

	/** Open a passage: `path#heading`, or the note at the passage's line. */
	openCandidate(candidate: Candidate, event: MouseEvent | KeyboardEvent, sourcePath: string): void {
		const { linktext, line } = linkTarget(candidate);
		const state = line !== null ? { eState: { line } } : undefined;
		void this.app.workspace.openLinkText(linktext, sourcePath, Keymap.isModEvent(event), state);
	}

	async copyContext(): Promise<void> {
		const selection = this.app.workspace.activeEditor?.editor?.getSelection().trim();
		const query = selection || (await askQuestion(this.app));
		if (!query) return;
		try {
			const context = await this.client.context(query, {
				budget: this.settings.budget || null,
				noVectors: !this.settings.useVectors,
			});
			const copied = formatContext(query, context);
			await navigator.clipboard.writeText(copied.markdown);
			this.notifier.info(copiedNotice(copied));
		} catch (error) {
			this.notifier.report(asProblem(error, "copy context"), true);
		}
	}

	/** Forget the notes recorded as open, and say what still counts (notes edited lately). */
	async clearFocus(): Promise<void> {
		try {
			const left = await this.client.clearFocus();
			this.notifier.info(clearedNotice(left));
		} catch (error) {
			this.notifier.report(asProblem(error, "clear the focus"), true);
		}
	}

	/** Start `vaultctx serve` for this vault unless a server for it answers already. */
	async startServer(): Promise<void> {
		const vaultPath = this.vaultPath;
		if (vaultPath === null) return;
		try {
			await this.client.status();
			this.notifier.info("vaultctx: the server for this vault is already running.");
			return;
		} catch (error) {
			const problem = asProblem(error, "status");
			if (problem.kind !== "not-running") {
				this.notifier.report(problem, true);
				return;
			}
		}
		this.statusBar?.set("starting");
		try {
			const info = await this.server.start({
				executable: this.settings.executable,
				vaultPath,
				extraArgs: splitArgs(this.settings.serveArgs),
			});
			this.client.reset();
			this.notifier.clear();
			this.notifier.info(`vaultctx: started the server for this vault on 127.0.0.1:${info.port}.`);
			await this.refreshStatus();
			for (const leaf of this.app.workspace.getLeavesOfType(VIEW_TYPE)) {
				if (leaf.view instanceof ContextView) leaf.view.controller?.refresh();
			}
		} catch (error) {
			this.statusBar?.set("not-running");
			const message = error instanceof StartFailed ? error.message : asProblem(error, "start").message;
			this.notifier.report(new ServerProblem("not-running", message), true);
		}
	}

	stopServer(): void {
		if (this.server.stop()) {
			this.client.reset();
			this.statusBar?.set("not-running");
			this.notifier.info("vaultctx: stopped the server this plugin started.");
		}
	}

	/** Ask the server how it is (the status bar shows whether it is indexing). */
	async refreshStatus(): Promise<void> {
		try {
			const status = await this.client.status();
			this.statusBar?.set(status.server?.indexing ? "indexing" : "connected");
		} catch (error) {
			this.notifier.report(asProblem(error, "status"));
		}
	}

	async checkConnection(): Promise<void> {
		try {
			const status = await this.client.status();
			this.statusBar?.set(status.server?.indexing ? "indexing" : "connected");
			this.notifier.clear();
			const notes = status.notes !== undefined ? `, ${status.notes} notes indexed` : "";
			this.notifier.info(`vaultctx: connected to this vault's server${notes}.`);
		} catch (error) {
			this.notifier.report(asProblem(error, "status"), true);
		}
	}
}

/** What the user is told once the focus is cleared. */
export function clearedNotice(left: Focus): string {
	const forgot = left.cleared ?? 0;
	const opened = `vaultctx: forgot ${forgot} open note${forgot === 1 ? "" : "s"}`;
	if (left.notes.length === 0) return `${opened}; answers now rank by the question alone.`;
	const edited = left.notes.map((n) => n.path).join(", ");
	return `${opened}; notes edited lately still count a little: ${edited}.`;
}
