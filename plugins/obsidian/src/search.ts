// Search as you type: a modal whose results come from `/select` while the user types
// (debounced, stale answers dropped); arrows move, Enter opens the note at the passage.

import { App, SuggestModal } from "obsidian";

import type { VaultctxClient } from "./client";
import { LatestOnly } from "./latest";
import type { Notifier } from "./notify";
import { asProblem } from "./problems";
import { renderCandidate, renderNoGoodMatch } from "./render";
import type { Candidate, Selection } from "./types";

export const SEARCH_DEBOUNCE_MS = 120;
const EMPTY = "Type to search the vault with vaultctx.";

export interface SearchHost {
	client: Pick<VaultctxClient, "select">;
	notifier: Pick<Notifier, "report" | "clear">;
	options: () => { k: number; noVectors: boolean };
	open(candidate: Candidate, event: MouseEvent | KeyboardEvent): void;
}

export class SearchModal extends SuggestModal<Candidate> {
	readonly latest: LatestOnly<string, Selection>;
	/** The first of the shown passages when the server said no good match (else null). */
	private closest: Candidate | null = null;

	constructor(
		app: App,
		private readonly host: SearchHost,
		debounceMs = SEARCH_DEBOUNCE_MS,
	) {
		super(app);
		this.setPlaceholder("Search your notes (vaultctx)…");
		this.setInstructions([
			{ command: "↑↓", purpose: "to navigate" },
			{ command: "↵", purpose: "to open at the passage" },
			{ command: "esc", purpose: "to dismiss" },
		]);
		this.emptyStateText = EMPTY;
		this.limit = 50;
		this.latest = new LatestOnly(
			(query) => {
				const { k, noVectors } = host.options();
				return host.client.select(query, { k: Math.max(k, 20), noVectors });
			},
			debounceMs,
		);
	}

	async getSuggestions(query: string): Promise<Candidate[]> {
		if (!query.trim()) {
			this.latest.cancel();
			this.emptyStateText = EMPTY;
			return [];
		}
		const outcome = await this.latest.schedule(query);
		if (outcome.status === "cancelled") return [];
		if (outcome.status === "failed") {
			const problem = asProblem(outcome.error, "search");
			this.host.notifier.report(problem);
			this.emptyStateText = problem.message;
			return [];
		}
		this.host.notifier.clear();
		this.emptyStateText = "No passage matches.";
		const passages = outcome.value.candidates.filter((candidate) => candidate.kind !== "memory");
		this.closest = outcome.value.no_good_match === true ? (passages[0] ?? null) : null;
		return passages;
	}

	renderSuggestion(candidate: Candidate, el: HTMLElement): void {
		el.classList.add("vaultctx-suggestion");
		if (candidate === this.closest) renderNoGoodMatch(el);
		renderCandidate(el, candidate);
	}

	onChooseSuggestion(candidate: Candidate, event: MouseEvent | KeyboardEvent): void {
		this.host.open(candidate, event);
	}

	onClose(): void {
		super.onClose();
		this.latest.cancel();
	}
}
