// The context panel: a right-sidebar view that follows the open note and shows the notes
// that matter for it. `PanelController` holds the logic (what to ask, when, what to show);
// `ContextView` is the Obsidian view around it.

import { HoverPopover, ItemView, TAbstractFile, TFile, WorkspaceLeaf } from "obsidian";

import type { VaultctxClient } from "./client";
import { LatestOnly, Outcome, Clock, realClock } from "./latest";
import type { Notifier } from "./notify";
import { ServerProblem, asProblem } from "./problems";
import { groupByNote, linkTarget, PanelHandlers, PanelState, renderPanel } from "./render";
import type { Candidate, Selection } from "./types";

export const VIEW_TYPE = "vaultctx-related";
export const NOTE_CHANGE_DEBOUNCE_MS = 250;
/** After a note is saved, the server's watcher needs a moment to index it. */
export const VAULT_CHANGE_REFRESH_MS = 1500;

export interface OpenNote {
	path: string;
	basename: string;
	extension: string;
}

interface Request {
	path: string;
	touch: boolean;
}

export interface PanelDeps {
	client: Pick<VaultctxClient, "related">;
	options: () => { k: number; noVectors: boolean };
	notifier: Pick<Notifier, "report" | "clear">;
	handlers: PanelHandlers;
	/** Whether the panel can be seen now: no work is done for a hidden panel. */
	isVisible?: () => boolean;
	debounceMs?: number;
	refreshMs?: number;
	clock?: Clock;
	/** Called after each render, with the time since the note changed (tests, benchmark). */
	onRendered?: (state: PanelState, sinceChangeMs: number) => void;
}

export class PanelController {
	state: PanelState = { kind: "idle" };
	/** The note the panel is about (what it shows, or is fetching). */
	note: OpenNote | null = null;
	/** The note whose answer (results or problem) the panel shows now. */
	answered: string | null = null;
	private wanted: OpenNote | null = null;
	private touched: string | null = null;
	private changedAt = 0;
	private refreshTimer: unknown = null;
	private readonly latest: LatestOnly<Request, Selection>;
	private readonly clock: Clock;
	private closed = false;

	constructor(
		private readonly root: HTMLElement,
		private readonly deps: PanelDeps,
	) {
		this.clock = deps.clock ?? realClock;
		this.latest = new LatestOnly(
			(request) => {
				const { k, noVectors } = deps.options();
				return deps.client.related(request.path, { k, noVectors, touch: request.touch });
			},
			deps.debounceMs ?? NOTE_CHANGE_DEBOUNCE_MS,
			this.clock,
		);
		this.render(this.state);
	}

	/** How many answers came after a newer request and were dropped. */
	get droppedAnswers(): number {
		return this.latest.dropped;
	}

	/** The active note changed (null: none, or not a Markdown note). */
	noteChanged(file: OpenNote | null): void {
		if (this.closed) return;
		const note = file && file.extension === "md" ? file : null;
		this.wanted = note;
		if (!this.visible()) return; // shown later, when the panel is
		this.show(note);
	}

	/** The layout changed: a panel that has become visible catches up with the open note. */
	visibilityChanged(): void {
		if (this.closed || !this.visible()) return;
		if (this.wanted?.path !== this.note?.path || this.state.kind === "idle") {
			this.show(this.wanted);
		}
	}

	/** A note of the vault was saved, created, renamed or deleted: ask again once the
	 * server's watcher has indexed it (without recording the open note again). */
	vaultChanged(): void {
		if (this.closed || this.note === null) return;
		if (this.refreshTimer !== null) this.clock.clearTimeout(this.refreshTimer);
		this.refreshTimer = this.clock.setTimeout(() => {
			this.refreshTimer = null;
			this.refresh();
		}, this.deps.refreshMs ?? VAULT_CHANGE_REFRESH_MS);
	}

	/** Ask again for the open note. */
	refresh(): void {
		if (this.closed || !this.visible() || this.note === null) return;
		this.fetch(this.note);
	}

	close(): void {
		this.closed = true;
		this.latest.cancel();
		if (this.refreshTimer !== null) this.clock.clearTimeout(this.refreshTimer);
	}

	private visible(): boolean {
		return this.deps.isVisible?.() ?? true;
	}

	private show(note: OpenNote | null): void {
		if (note === null) {
			this.note = null;
			this.answered = null;
			this.latest.cancel();
			this.render({ kind: "idle" });
			return;
		}
		if (note.path === this.note?.path && this.state.kind === "results") return;
		this.note = note;
		this.answered = null;
		this.changedAt = this.clock.now();
		if (this.state.kind !== "results") this.render({ kind: "loading", note: note.basename });
		this.fetch(note);
	}

	/** The note is recorded as open (`touch`) by its first answered request only. */
	private fetch(note: OpenNote): void {
		const touch = this.touched !== note.path;
		this.latest.schedule({ path: note.path, touch }).then((outcome) => this.answer(note, outcome, touch));
	}

	private answer(note: OpenNote, outcome: Outcome<Selection>, touched: boolean): void {
		if (this.closed || outcome.status === "cancelled" || note.path !== this.note?.path) return;
		this.answered = note.path;
		if (outcome.status === "done") {
			if (touched) this.touched = note.path;
			this.deps.notifier.clear();
			const entries = groupByNote(outcome.value.candidates, note.path, this.deps.options().k);
			const noGoodMatch = outcome.value.no_good_match === true;
			this.render({ kind: "results", note: note.basename, entries, ms: outcome.ms, noGoodMatch });
			return;
		}
		const problem = asProblem(outcome.error, "related notes");
		if (problem.kind === "not-found") {
			// Not a broken link: the note is new (not indexed yet) or the vault hides it.
			this.render({
				kind: "idle",
				message: "This note is not in the index yet (it is indexed when saved), or the vault's policy hides it.",
			});
			return;
		}
		this.deps.notifier.report(problem);
		this.render(problemState(problem));
	}

	private render(state: PanelState): void {
		this.state = state;
		renderPanel(this.root, state, this.deps.handlers);
		this.deps.onRendered?.(state, this.clock.now() - this.changedAt);
	}
}

export function problemState(problem: ServerProblem): PanelState {
	const action = problem.kind === "not-running" ? "start" : "retry";
	return { kind: "problem", message: problem.message.replace(/^vaultctx: /, ""), action };
}

/** What the view needs from the plugin. */
export interface PanelHost {
	client: VaultctxClient;
	notifier: Notifier;
	settings: { k: number; useVectors: boolean };
	openCandidate(candidate: Candidate, event: MouseEvent | KeyboardEvent, sourcePath: string): void;
	startServer(): Promise<void>;
	refreshStatus(): void;
}

export class ContextView extends ItemView {
	hoverPopover: HoverPopover | null = null;
	controller: PanelController | null = null;

	constructor(
		leaf: WorkspaceLeaf,
		private readonly host: PanelHost,
	) {
		super(leaf);
	}

	getViewType(): string {
		return VIEW_TYPE;
	}

	getDisplayText(): string {
		return "Related notes";
	}

	getIcon(): string {
		return "waypoints";
	}

	async onOpen(): Promise<void> {
		const { workspace, vault } = this.app;
		const host = this.host;
		const controller = new PanelController(this.contentEl, {
			client: host.client,
			notifier: host.notifier,
			options: () => ({ k: host.settings.k, noVectors: !host.settings.useVectors }),
			isVisible: () => this.containerEl.isShown?.() ?? true,
			handlers: {
				open: (candidate, event) => host.openCandidate(candidate, event, controller.note?.path ?? ""),
				hover: (candidate, event, target) =>
					workspace.trigger("hover-link", {
						event,
						source: VIEW_TYPE,
						hoverParent: this,
						targetEl: target,
						linktext: linkTarget(candidate).linktext,
						sourcePath: controller.note?.path ?? "",
					}),
				start: () => void host.startServer(),
				retry: () => controller.refresh(),
			},
		});
		this.controller = controller;
		this.registerEvent(workspace.on("file-open", (file) => controller.noteChanged(file)));
		this.registerEvent(workspace.on("layout-change", () => controller.visibilityChanged()));
		const changed = (file: TAbstractFile) => {
			if (file instanceof TFile && file.extension === "md") controller.vaultChanged();
		};
		this.registerEvent(vault.on("modify", changed));
		this.registerEvent(vault.on("create", changed));
		this.registerEvent(vault.on("delete", changed));
		this.registerEvent(vault.on("rename", changed));
		this.registerInterval(window.setInterval(() => this.containerEl.isShown?.() && host.refreshStatus(), 10_000));
		controller.noteChanged(workspace.getActiveFile());
	}

	async onClose(): Promise<void> {
		this.controller?.close();
		this.controller = null;
	}
}
