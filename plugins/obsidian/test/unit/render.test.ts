import { describe, expect, it, vi } from "vitest";

import {
	badges,
	cleanHeading,
	groupByNote,
	headingTrail,
	linkTarget,
	renderPanel,
	snippet,
} from "../../src/render";
import { candidate } from "../helpers";

function root(): HTMLElement {
	const el = document.createElement("div");
	document.body.appendChild(el);
	return el;
}

const texts = (el: Element, selector: string) => [...el.querySelectorAll(selector)].map((e) => e.textContent);

describe("the results", () => {
	it("leave out the open note and memories, one entry per note in rank order", () => {
		const entries = groupByNote(
			[
				candidate("Open.md"),
				candidate("A.md", { id: "1" }),
				candidate("B.md"),
				candidate("A.md", { id: "2", heading: "Later", heading_path: "A > Later" }),
				candidate("", { kind: "memory", text: "a memory" }),
				candidate("C.md"),
			],
			"Open.md",
			2,
		);
		expect(entries.map((e) => e.path)).toEqual(["A.md", "B.md"]);
		expect(entries[0].more.map((c) => c.id)).toEqual(["2"]);
	});

	it("show the heading path below the title, without repeating the title", () => {
		expect(headingTrail(candidate("Smoker.md", { heading_path: "Smoker > Lighting > Fuel" }))).toEqual([
			"Lighting",
			"Fuel",
		]);
		expect(headingTrail(candidate("Smoker.md", { heading_path: "", heading: "" }))).toEqual([]);
	});

	it("say why each passage was found, with ranks", () => {
		const found = badges(
			candidate("A.md", {
				sources: { graph: { rank: 1, score: 1 }, vector: { rank: 4, score: 0.61 }, lexical: { rank: 2, score: 4.87 } },
			}),
		);
		expect(found.map((b) => b.label)).toEqual(["lexical #2", "vector #4", "graph #1"]);
		expect(found[1].title).toBe("vector: rank 4, score 0.61 — its meaning is close (embedding search)");
	});

	it("name a plug-in retriever the server ran, after the built-in ones", () => {
		const found = badges(
			candidate("A.md", { sources: { titles: { rank: 1, score: 1 }, lexical: { rank: 3, score: 2.5 } } }),
		);
		expect(found.map((b) => b.label)).toEqual(["lexical #3", "titles #1"]);
		expect(found[1].title).toBe("titles: rank 1, score 1.00 — found by the titles retriever");
	});
});

describe("a snippet", () => {
	it("is plain text: links, emphasis, lists and headings stripped", () => {
		const text =
			"## Why\n- Treat **both** with [[Thymol Treatment|thymol]] now; see [[Varroa Mites#Why August matters]].\n" +
			"![[photo.png]] > quoted `code` ^block-1";
		expect(snippet(text)).toBe(
			"Why Treat both with thymol now; see Varroa Mites › Why August matters. quoted code",
		);
	});

	it("reads a table row by row", () => {
		expect(snippet("| | Egg | Larva |\n|---|:---:|---|\n| Queen | 3 | ~5½ |\n| Worker | 3 | 6 |")).toBe(
			"Egg · Larva Queen · 3 · ~5½ Worker · 3 · 6",
		);
	});

	it("keeps the words of *emphasis* and snake_case names", () => {
		expect(snippet("NBU *Managing Varroa* and _Foulbrood_ leaflets; see my_note_name")).toBe(
			"NBU Managing Varroa and Foulbrood leaflets; see my_note_name",
		);
	});

	it("is cut at a word with an ellipsis", () => {
		const cut = snippet("word ".repeat(100), 40);
		expect(cut.length).toBeLessThanOrEqual(41);
		expect(cut.endsWith("word…")).toBe(true);
	});
});

describe("a link to a passage", () => {
	it("names the heading when there is one", () => {
		expect(linkTarget(candidate("Pests/Varroa Mites.md", { heading: "Why August matters" }))).toEqual({
			linktext: "Pests/Varroa Mites#Why August matters",
			line: null,
		});
	});

	it("opens at the passage's line otherwise (0-based for the editor)", () => {
		expect(linkTarget(candidate("Inbox.md", { heading: null, start_line: 5 }))).toEqual({
			linktext: "Inbox",
			line: 4,
		});
	});

	it("opens a PDF's passage at its page", () => {
		expect(linkTarget(candidate("Papers/paper.pdf", { heading: "page 3", start_line: 3 }))).toEqual({
			linktext: "Papers/paper.pdf#page=3",
			line: null,
		});
	});

	it("keeps no character a link cannot hold", () => {
		expect(cleanHeading("C# [draft] | v2 ^x")).toBe("C draft v2 x");
	});
});

describe("the panel", () => {
	it("shows title, heading path, snippet, badges and score of each note", () => {
		const el = root();
		const open = vi.fn();
		const hover = vi.fn();
		const entries = groupByNote(
			[
				candidate("Hives/Smoker.md", {
					score: 0.9412,
					heading_path: "Smoker > Putting it out",
					text: "Plug the **nozzle** with grass.",
					sources: { lexical: { rank: 1, score: 4.8 }, graph: { rank: 2, score: 1 } },
				}),
				candidate("Hives/Smoker.md", { heading: "Fuel", heading_path: "Smoker > Fuel" }),
				candidate("Queen.md"),
			],
			"Open.md",
			10,
		);
		renderPanel(el, { kind: "results", note: "Open", entries, ms: 23.4 }, { open, hover });
		expect(el.querySelector(".vaultctx-header")!.textContent).toBe("Related to Open2 notes · 23 ms");
		expect(texts(el, ".vaultctx-result-title")).toEqual(["Smoker", "Queen"]);
		expect(texts(el, ".vaultctx-result-heading")).toEqual(["Putting it out", "Notes"]);
		expect(texts(el, ".vaultctx-result-snippet")[0]).toBe("Plug the nozzle with grass.");
		expect(texts(el, ".vaultctx-score")).toEqual(["0.94", "0.50"]);
		expect(texts(el, ".vaultctx-result:first-child .vaultctx-badge")).toEqual(["lexical #1", "graph #2"]);
		expect(texts(el, ".vaultctx-more-link")).toEqual(["› Fuel"]);

		const first = el.querySelector<HTMLElement>(".vaultctx-result")!;
		first.dispatchEvent(new MouseEvent("click", { bubbles: true }));
		expect(open).toHaveBeenLastCalledWith(entries[0].best, expect.any(MouseEvent));
		first.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
		expect(open).toHaveBeenCalledTimes(2);
		el.querySelector<HTMLElement>(".vaultctx-more-link")!.click();
		expect(open).toHaveBeenLastCalledWith(entries[0].more[0], expect.any(MouseEvent));
		expect(open).toHaveBeenCalledTimes(3); // the passage only, not its note as well
		first.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
		expect(hover).toHaveBeenCalledWith(entries[0].best, expect.any(MouseEvent), first);
	});

	it("says so when nothing relates", () => {
		const el = root();
		renderPanel(el, { kind: "results", note: "Lonely", entries: [] }, { open: vi.fn() });
		expect(el.querySelector(".vaultctx-empty")!.textContent).toMatch(/Nothing else in the vault relates/);
	});

	it("offers to start the server when none runs, and to try again otherwise", () => {
		const el = root();
		const start = vi.fn();
		const retry = vi.fn();
		renderPanel(el, { kind: "problem", message: "no server", action: "start" }, { open: vi.fn(), start, retry });
		el.querySelector("button")!.click();
		expect(start).toHaveBeenCalledOnce();
		renderPanel(el, { kind: "problem", message: "slow", action: "retry" }, { open: vi.fn(), start, retry });
		expect(el.querySelector("button")!.textContent).toBe("Try again");
		el.querySelector("button")!.click();
		expect(retry).toHaveBeenCalledOnce();
	});

	it("renders text as text, never as HTML", () => {
		const el = root();
		const entries = groupByNote([candidate("x.md", { title: "<img src=x onerror=alert(1)>", text: "<b>bold</b>" })], null, 5);
		renderPanel(el, { kind: "results", note: "<i>n</i>", entries }, { open: vi.fn() });
		expect(el.querySelector("img, b, i")).toBeNull();
		expect(el.querySelector(".vaultctx-result-title")!.textContent).toBe("<img src=x onerror=alert(1)>");
	});
});

describe("an answer with no good match", () => {
	it("says so above the closest notes, each with its confidence", () => {
		const el = root();
		const entries = groupByNote([candidate("Far.md", { confidence: 0.04 }), candidate("Farther.md", { confidence: 0.01 })], null, 5);
		renderPanel(el, { kind: "results", note: "Open", entries, noGoodMatch: true }, { open: vi.fn() });
		expect(el.querySelector(".vaultctx-no-match")!.textContent).toBe("No good match; closest:");
		expect(texts(el, ".vaultctx-result-title")).toEqual(["Far", "Farther"]);
		expect(texts(el, ".vaultctx-confidence")).toEqual(["4%", "1%"]);
	});

	it("is not claimed of a good match", () => {
		const el = root();
		const entries = groupByNote([candidate("Near.md", { confidence: 0.93 })], null, 5);
		renderPanel(el, { kind: "results", note: "Open", entries, noGoodMatch: false }, { open: vi.fn() });
		expect(el.querySelector(".vaultctx-no-match")).toBeNull();
		expect(texts(el, ".vaultctx-confidence")).toEqual(["93%"]);
	});
});
