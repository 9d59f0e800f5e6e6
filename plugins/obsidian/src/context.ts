// "Context for an LLM in one key": a SessionContext as Markdown with [[links]] to its sources,
// and the small modal that asks for a question when nothing is selected.

import { App, Modal } from "obsidian";

import { cleanHeading } from "./render";
import type { ContextItem, SessionContext } from "./types";

export interface CopiedContext {
	markdown: string;
	notes: number;
	tokens: number;
}

/** `[[path#heading]]` for an item (the path without `.md`, as Obsidian links it). */
export function sourceLink(item: ContextItem): string | null {
	if (!item.path) return null;
	const path = item.path.replace(/\.md$/i, "");
	const heading = item.heading ? cleanHeading(item.heading) : "";
	return heading ? `[[${path}#${heading}]]` : `[[${path}]]`;
}

/** The context as Markdown: the question, then each passage under a link to its source. */
export function formatContext(query: string, context: SessionContext): CopiedContext {
	const notes = new Set<string>();
	const lines = [`## Context from my notes`, "", `> ${oneLine(query)}`, ""];
	for (const item of context.items) {
		const link = sourceLink(item);
		if (item.path) notes.add(item.path);
		lines.push(`### ${link ?? "From memory"}`, "", item.text.trim(), "");
	}
	const sources = [...notes].map((path) => `[[${path.replace(/\.md$/i, "")}]]`);
	if (sources.length) lines.push(`Sources: ${sources.join(", ")}`, "");
	lines.push(
		`<!-- vaultctx context: ${context.items.length} passages, ${context.token_count}/${context.budget} tokens, ` +
			`gate ${context.gate}, hash ${context.context_hash} -->`,
	);
	return { markdown: `${lines.join("\n")}\n`, notes: notes.size, tokens: context.token_count };
}

function oneLine(text: string): string {
	return text.replace(/\s+/g, " ").trim();
}

export function copiedNotice(copied: CopiedContext): string {
	const notes = `${copied.notes} note${copied.notes === 1 ? "" : "s"}`;
	return `vaultctx: copied the context of ${notes} (${copied.tokens.toLocaleString("en-US")} tokens) to the clipboard.`;
}

/** Asks for a question; resolves with it, or null when dismissed. */
export class QuestionModal extends Modal {
	private answered = false;

	constructor(
		app: App,
		private readonly resolve: (question: string | null) => void,
	) {
		super(app);
	}

	onOpen(): void {
		this.titleEl.textContent = "Context for an LLM";
		const doc = this.contentEl.ownerDocument;
		const form = doc.createElement("form");
		form.className = "vaultctx-question";
		const input = doc.createElement("input");
		input.type = "text";
		input.placeholder = "What should the context be about?";
		input.className = "vaultctx-question-input";
		const button = doc.createElement("button");
		button.type = "submit";
		button.className = "mod-cta";
		button.textContent = "Copy context";
		form.append(input, button);
		form.addEventListener("submit", (event) => {
			event.preventDefault();
			const question = input.value.trim();
			if (!question) return;
			this.answered = true;
			this.close();
			this.resolve(question);
		});
		this.contentEl.appendChild(form);
		input.focus();
	}

	onClose(): void {
		this.contentEl.replaceChildren();
		if (!this.answered) this.resolve(null);
	}
}

export function askQuestion(app: App): Promise<string | null> {
	return new Promise((resolve) => new QuestionModal(app, resolve).open());
}
