import { describe, expect, it } from "vitest";

import { copiedNotice, formatContext, sourceLink } from "../../src/context";
import type { SessionContext } from "../../src/types";

const context: SessionContext = {
	items: [
		{ id: "block:1", kind: "block", path: "Hives/Varroa Mites.md", heading: "Why August matters", text: "Winter bees.\n" },
		{ id: "block:2", kind: "block", path: "Hives/Varroa Mites.md", heading: null, text: "Intro." },
		{ id: "block:3", kind: "block", path: "Journal/2025-08-16.md", heading: "Decision", text: "Treated both." },
		{ id: "memory:4", kind: "memory", path: null, text: "The hives moved to the orchard." },
	],
	token_count: 1234,
	budget: 2000,
	gate: "deterministic",
	context_hash: "abcdef0123456789",
};

describe("copied context", () => {
	it("links each passage to its source as [[path#heading]]", () => {
		expect(sourceLink(context.items[0])).toBe("[[Hives/Varroa Mites#Why August matters]]");
		expect(sourceLink(context.items[1])).toBe("[[Hives/Varroa Mites]]");
		expect(sourceLink(context.items[3])).toBeNull();
	});

	it("is Markdown with the question, the passages and the sources", () => {
		const copied = formatContext("when to\ntreat?", context);
		expect(copied.notes).toBe(2);
		expect(copied.tokens).toBe(1234);
		expect(copied.markdown).toBe(
			[
				"## Context from my notes",
				"",
				"> when to treat?",
				"",
				"### [[Hives/Varroa Mites#Why August matters]]",
				"",
				"Winter bees.",
				"",
				"### [[Hives/Varroa Mites]]",
				"",
				"Intro.",
				"",
				"### [[Journal/2025-08-16#Decision]]",
				"",
				"Treated both.",
				"",
				"### From memory",
				"",
				"The hives moved to the orchard.",
				"",
				"Sources: [[Hives/Varroa Mites]], [[Journal/2025-08-16]]",
				"",
				"<!-- vaultctx context: 4 passages, 1234/2000 tokens, gate deterministic, hash abcdef0123456789 -->",
				"",
			].join("\n"),
		);
	});

	it("is announced with its notes and tokens", () => {
		expect(copiedNotice({ markdown: "", notes: 2, tokens: 1234 })).toBe(
			"vaultctx: copied the context of 2 notes (1,234 tokens) to the clipboard.",
		);
		expect(copiedNotice({ markdown: "", notes: 1, tokens: 5 })).toMatch(/of 1 note \(5 tokens\)/);
	});
});
