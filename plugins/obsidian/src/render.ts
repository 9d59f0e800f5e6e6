// The panel's and the search modal's DOM, built with the standard DOM API only (no Obsidian
// helpers), so that the same code renders in Obsidian, in jsdom and in a real browser test.

import type { Candidate, Retriever } from "./types";

/** The retrievers vaultctx ships, in the order badges show them; any other comes after. */
export const RETRIEVERS: Retriever[] = ["lexical", "vector", "graph", "memory"];

const WHY: Record<string, string> = {
	lexical: "its words match (full-text search)",
	vector: "its meaning is close (embedding search)",
	graph: "it is linked with the note you have open",
	memory: "a memory of earlier sessions",
};

/** One note of the panel: its best passage, and its other passages among the results. */
export interface RelatedEntry {
	path: string;
	title: string;
	best: Candidate;
	more: Candidate[];
}

export type PanelState =
	| { kind: "idle"; message?: string }
	| { kind: "loading"; note: string }
	| { kind: "results"; note: string; entries: RelatedEntry[]; ms?: number; noGoodMatch?: boolean }
	| { kind: "problem"; message: string; action?: "start" | "retry" };

export interface PanelHandlers {
	open(candidate: Candidate, event: MouseEvent | KeyboardEvent): void;
	hover?(candidate: Candidate, event: MouseEvent, target: HTMLElement): void;
	start?(): void;
	retry?(): void;
}

/** Candidates grouped by note, in rank order, the open note and memories left out. */
export function groupByNote(
	candidates: Candidate[],
	openPath: string | null,
	limit: number,
): RelatedEntry[] {
	const entries = new Map<string, RelatedEntry>();
	for (const candidate of candidates) {
		if (!candidate.path || candidate.kind === "memory" || candidate.path === openPath) continue;
		const entry = entries.get(candidate.path);
		if (entry) {
			entry.more.push(candidate);
		} else if (entries.size < limit) {
			entries.set(candidate.path, {
				path: candidate.path,
				title: titleOf(candidate),
				best: candidate,
				more: [],
			});
		}
	}
	return [...entries.values()];
}

export function titleOf(candidate: Pick<Candidate, "title" | "path">): string {
	if (candidate.title) return candidate.title;
	const name = candidate.path.split("/").pop() ?? candidate.path;
	return name.replace(/\.md$/i, "");
}

/** The heading path to show: the note's own title (its H1) is already the entry's title. */
export function headingTrail(candidate: Candidate): string[] {
	const raw = candidate.heading_path || candidate.heading || "";
	const parts = raw
		.split(" > ")
		.map((part) => part.trim())
		.filter(Boolean);
	if (parts.length && parts[0] === titleOf(candidate)) parts.shift();
	return parts;
}

/** A short plain-text snippet of a passage's Markdown. */
export function snippet(text: string, max = 180): string {
	const plain = tableRows(text)
		.replace(/^---\n[\s\S]*?\n---\n/, "") // frontmatter
		.replace(/```[\s\S]*?```/g, " ") // fenced code
		.replace(/!\[\[[^\]]*\]\]/g, " ") // embeds
		.replace(/\[\[([^\]|#]*)(?:#[^\]|]*)?\|([^\]]*)\]\]/g, "$2") // [[target|label]]
		.replace(/\[\[([^\]|]*)\]\]/g, (_, target: string) => target.replace("#", " › "))
		.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // [label](url), ![alt](src)
		.replace(/^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+(\[[ xX]\]\s+)?|\d+[.)]\s+)/gm, "")
		.replace(/(\*\*|__|~~|==|`)/g, "")
		.replace(/(^|[^\w*])[*_]([^*_\n]+)[*_](?![\w*])/g, "$1$2") // *emphasis*, _emphasis_
		.replace(/\s+\^[\w-]+\s*$/gm, "") // block ids
		.replace(/\s+/g, " ")
		.trim();
	if (plain.length <= max) return plain;
	const cut = plain.slice(0, max);
	const space = cut.lastIndexOf(" ");
	return `${(space > max * 0.6 ? cut.slice(0, space) : cut).replace(/[\s,.;:]+$/, "")}…`;
}

/** Table rows as their cells joined by " · ", separator rows dropped. */
function tableRows(text: string): string {
	if (!text.includes("|")) return text;
	return text
		.split("\n")
		.map((line) => {
			if (!/^\s*\|.*\|\s*$/.test(line)) return line;
			const cells = line.split("|").map((cell) => cell.trim()).filter(Boolean);
			return cells.every((cell) => /^:?-+:?$/.test(cell)) ? "" : cells.join(" · ");
		})
		.join("\n");
}

export interface Badge {
	retriever: Retriever;
	label: string;
	title: string;
}

/** Why a candidate was found, as `--explain` says it: each retriever that found it (those
 * the server ran, plug-ins too) with its rank. */
export function badges(candidate: Candidate): Badge[] {
	const sources = candidate.sources ?? {};
	const known = RETRIEVERS.filter((name) => name in sources);
	const others = Object.keys(sources).filter((name) => !RETRIEVERS.includes(name));
	const found: Badge[] = [];
	for (const retriever of [...known, ...others]) {
		const source = sources[retriever];
		if (!source) continue;
		const why = WHY[retriever] ?? `found by the ${retriever} retriever`;
		found.push({
			retriever,
			label: `${retriever} #${source.rank}`,
			title: `${retriever}: rank ${source.rank}, score ${formatScore(source.score)} — ${why}`,
		});
	}
	return found;
}

export function formatScore(score: number): string {
	return Number.isFinite(score) ? score.toFixed(2) : "–";
}

/** Where to open a passage: a PDF's at its page (`paper.pdf#page=3`), else `path#heading`
 * when it has one, else the note at its first line (`line` is the editor's 0-based line;
 * the server's `start_line` counts from 1). */
export function linkTarget(candidate: Candidate): { linktext: string; line: number | null } {
	// A PDF's passage opens at its page: its lines are the page's number.
	if (/\.pdf$/i.test(candidate.path) && typeof candidate.start_line === "number") {
		return { linktext: `${candidate.path}#page=${candidate.start_line}`, line: null };
	}
	const path = candidate.path.replace(/\.md$/i, "");
	const heading = candidate.heading ? cleanHeading(candidate.heading) : "";
	if (heading) return { linktext: `${path}#${heading}`, line: null };
	const line = typeof candidate.start_line === "number" ? Math.max(0, candidate.start_line - 1) : null;
	return { linktext: path, line };
}

/** A heading as Obsidian's links spell it: without the characters a link cannot hold. */
export function cleanHeading(heading: string): string {
	return heading.replace(/[#|^[\]]+/g, " ").replace(/\s+/g, " ").trim();
}

function el<K extends keyof HTMLElementTagNameMap>(
	parent: HTMLElement,
	tag: K,
	className?: string,
	text?: string,
): HTMLElementTagNameMap[K] {
	const child = parent.ownerDocument.createElement(tag);
	if (className) child.className = className;
	if (text !== undefined) child.textContent = text;
	parent.appendChild(child);
	return child;
}

/** What the panel and the search modal say above results that answer nothing well. */
export const NO_GOOD_MATCH = "No good match; closest:";

/** The notice above the closest passages when the server says nothing matches well. */
export function renderNoGoodMatch(parent: HTMLElement): HTMLElement {
	const notice = el(parent, "div", "vaultctx-no-match", NO_GOOD_MATCH);
	notice.title = "Nothing in the vault answers this well: these passages are only the closest ones.";
	return notice;
}

/** A confidence as a percentage ("–" when the server gave none). */
export function formatConfidence(confidence: number | undefined): string {
	return typeof confidence === "number" && Number.isFinite(confidence) ? `${Math.round(confidence * 100)}%` : "–";
}

/** One passage: title and score, heading path, snippet and badges (panel and search modal). */
export function renderCandidate(parent: HTMLElement, candidate: Candidate, title?: string): void {
	const top = el(parent, "div", "vaultctx-result-top");
	el(top, "span", "vaultctx-result-title", title ?? titleOf(candidate));
	const score = el(top, "span", "vaultctx-score", formatScore(candidate.score));
	score.title = "note score: 1 is the best possible match, more when linked with the open note";
	if (candidate.confidence !== undefined) {
		const sure = el(top, "span", "vaultctx-confidence", formatConfidence(candidate.confidence));
		sure.title = "confidence that this passage answers the question";
	}
	const trail = headingTrail(candidate);
	if (trail.length) el(parent, "div", "vaultctx-result-heading", trail.join(" › "));
	const text = snippet(candidate.text);
	if (text) el(parent, "div", "vaultctx-result-snippet", text);
	const found = badges(candidate);
	if (found.length) {
		const row = el(parent, "div", "vaultctx-badges");
		for (const badge of found) {
			const span = el(row, "span", `vaultctx-badge vaultctx-badge-${badge.retriever}`, badge.label);
			span.title = badge.title;
		}
	}
}

/** The whole panel for `state`, replacing what `root` held. */
export function renderPanel(root: HTMLElement, state: PanelState, handlers: PanelHandlers): void {
	root.replaceChildren();
	root.classList.add("vaultctx-panel");
	root.classList.toggle("is-loading", state.kind === "loading");
	if (state.kind === "idle") {
		el(root, "div", "vaultctx-empty", state.message ?? "Open a note to see the notes that matter for it.");
		return;
	}
	if (state.kind === "problem") {
		const box = el(root, "div", "vaultctx-problem");
		el(box, "div", "vaultctx-problem-message", state.message);
		if (state.action === "start" && handlers.start) {
			const button = el(box, "button", "mod-cta", "Start the server");
			button.addEventListener("click", () => handlers.start?.());
		} else if (state.action === "retry" && handlers.retry) {
			const button = el(box, "button", "", "Try again");
			button.addEventListener("click", () => handlers.retry?.());
		}
		return;
	}
	const header = el(root, "div", "vaultctx-header");
	el(header, "span", "vaultctx-header-label", "Related to ");
	el(header, "span", "vaultctx-header-note", state.note);
	if (state.kind === "loading") {
		el(header, "span", "vaultctx-header-meta", "…");
		return;
	}
	const count = state.entries.length;
	const meta = `${count} note${count === 1 ? "" : "s"}${state.ms !== undefined ? ` · ${Math.round(state.ms)} ms` : ""}`;
	el(header, "span", "vaultctx-header-meta", meta);
	if (!count) {
		el(root, "div", "vaultctx-empty", "Nothing else in the vault relates to this note yet.");
		return;
	}
	if (state.noGoodMatch) renderNoGoodMatch(root);
	const list = el(root, "ol", "vaultctx-results");
	for (const entry of state.entries) {
		const item = el(list, "li", "vaultctx-result");
		item.tabIndex = 0;
		item.dataset.path = entry.path;
		renderCandidate(item, entry.best, entry.title);
		item.addEventListener("click", (event) => handlers.open(entry.best, event));
		item.addEventListener("keydown", (event) => {
			if (event.key === "Enter") handlers.open(entry.best, event);
		});
		item.addEventListener("mouseover", (event) => handlers.hover?.(entry.best, event, item));
		if (entry.more.length) {
			const more = el(item, "ul", "vaultctx-more");
			for (const passage of entry.more) {
				const trail = headingTrail(passage);
				const link = el(more, "li", "vaultctx-more-link", `› ${trail.join(" › ") || "top of the note"}`);
				link.title = snippet(passage.text, 300);
				link.addEventListener("click", (event) => {
					event.stopPropagation();
					handlers.open(passage, event);
				});
				link.addEventListener("mouseover", (event) => {
					event.stopPropagation();
					handlers.hover?.(passage, event, link);
				});
			}
		}
	}
}
