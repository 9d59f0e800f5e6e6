import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { VaultctxClient } from "../../src/client";
import { Notifier } from "../../src/notify";
import { OpenNote, PanelController } from "../../src/panel";
import { candidate, deferred, fakeVault, FakeVault, resetStub, selection, serveFake, sleep, until } from "../helpers";
import { notices, requests, response, RequestUrlResponse, TFile } from "../obsidian-stub";

let vault: FakeVault;
let held: Map<string, ReturnType<typeof deferred<RequestUrlResponse>>>;
let bodies: Array<{ note: string; touch: boolean }>;
let hold: boolean;

/** A fake server whose /related answers can be held back per note. */
function serve(): void {
	serveFake(vault, {
		"POST /related": (_, body) => {
			bodies.push(body);
			const answer = response(
				200,
				selection(body.note, [
					candidate(body.note),
					candidate(`Near/${body.note}`, { title: `Near ${body.note.replace(/\.md$/, "")}` }),
					candidate("Other.md"),
				]),
			);
			if (!hold) return answer;
			const d = deferred<RequestUrlResponse>();
			held.set(body.note, d);
			return d.promise.then(() => answer);
		},
	});
}

function panel(options: { visible?: () => boolean; debounceMs?: number } = {}) {
	const root = document.createElement("div");
	const rendered: string[] = [];
	const open = vi.fn();
	const controller = new PanelController(root, {
		client: new VaultctxClient({ vaultPath: vault.root, timeoutMs: () => 2000 }),
		options: () => ({ k: 10, noVectors: false }),
		notifier: new Notifier(),
		handlers: { open, start: vi.fn() },
		isVisible: options.visible,
		debounceMs: options.debounceMs ?? 60,
		refreshMs: 30,
		onRendered: (state) => rendered.push(state.kind),
	});
	const titles = () => [...root.querySelectorAll(".vaultctx-result-title")].map((e) => e.textContent);
	return { root, controller, rendered, titles, open };
}

const note = (path: string): OpenNote => new TFile(path);
const relatedCalls = () => requests.filter((r) => r.url.endsWith("/related")).length;

beforeEach(() => {
	resetStub();
	vault = fakeVault(43210);
	held = new Map();
	bodies = [];
	hold = false;
	serve();
});
afterEach(resetStub);

describe("the panel follows the open note", () => {
	it("asks /related for it, touching it, and never shows the note itself", async () => {
		const { controller, titles, root } = panel();
		controller.noteChanged(note("Hives/Varroa.md"));
		await until(() => controller.state.kind === "results", "results");
		expect(bodies).toEqual([{ note: "Hives/Varroa.md", k: 10, no_vectors: false, touch: true }]);
		expect(titles()).toEqual(["Near Hives/Varroa", "Other"]);
		expect(root.querySelector(".vaultctx-header-note")!.textContent).toBe("Varroa");
	});

	it("coalesces quick note changes and shows only the last note's answer", async () => {
		const { controller, titles } = panel();
		controller.noteChanged(note("A.md"));
		controller.noteChanged(note("B.md"));
		controller.noteChanged(note("C.md"));
		await until(() => controller.state.kind === "results" && titles()[0] === "Near C", "C's results");
		expect(bodies.map((b) => b.note)).toEqual(["A.md", "C.md"]); // B was never asked
	});

	it("drops an answer that comes after a newer one", async () => {
		hold = true;
		const { controller, titles } = panel({ debounceMs: 0 });
		controller.noteChanged(note("Slow.md"));
		await until(() => held.has("Slow.md"), "slow request");
		controller.noteChanged(note("Fast.md"));
		await until(() => held.has("Fast.md"), "fast request");
		held.get("Fast.md")!.resolve(response(200, {}));
		await until(() => titles()[0] === "Near Fast", "fast results");
		held.get("Slow.md")!.resolve(response(200, {}));
		await until(() => controller.droppedAnswers === 1, "the slow answer dropped");
		expect(titles()[0]).toBe("Near Fast");
	});

	it("records the note as open once, and asks again without touching after a save", async () => {
		const { controller } = panel();
		controller.noteChanged(note("A.md"));
		await until(() => controller.state.kind === "results", "results");
		controller.noteChanged(note("A.md")); // the same note again: nothing to do
		controller.vaultChanged();
		controller.vaultChanged();
		await until(() => bodies.length === 2, "the refresh");
		await sleep(60);
		expect(bodies.map((b) => b.touch)).toEqual([true, false]);
	});

	it("does nothing for a hidden panel until it is shown", async () => {
		let visible = false;
		const { controller } = panel({ visible: () => visible });
		controller.noteChanged(note("A.md"));
		await sleep(100);
		expect(relatedCalls()).toBe(0);
		visible = true;
		controller.visibilityChanged();
		await until(() => controller.state.kind === "results", "results once shown");
		expect(bodies.map((b) => b.note)).toEqual(["A.md"]);
	});

	it("shows nothing for a file that is not a Markdown note", async () => {
		const { controller, root } = panel();
		controller.noteChanged(note("photo.png"));
		await sleep(50);
		expect(requests).toEqual([]);
		expect(root.textContent).toMatch(/Open a note/);
	});

	it("stops when closed", async () => {
		hold = true;
		const { controller, rendered } = panel();
		controller.noteChanged(note("A.md"));
		await until(() => held.has("A.md"), "request");
		controller.close();
		held.get("A.md")!.resolve(response(200, {}));
		await sleep(20);
		expect(rendered).toEqual(["idle", "loading"]);
	});
});

describe("when the server cannot answer", () => {
	it("shows the problem with a start button, and one notice for many note changes", async () => {
		serveFake(vault, { "POST /related": async () => Promise.reject(new Error("connect ECONNREFUSED")) });
		const { controller, root } = panel({ debounceMs: 0 });
		for (const path of ["A.md", "B.md", "C.md"]) {
			controller.noteChanged(note(path));
			await until(() => controller.state.kind === "problem" && controller.note?.path === path, path);
		}
		expect(notices).toHaveLength(1);
		expect(notices[0]).toMatch(/no server is running for this vault/);
		expect(root.querySelector("button")!.textContent).toBe("Start the server");
	});

	it("says a note the index lacks is not indexed yet, without a notice", async () => {
		serveFake(vault, {
			"POST /related": () => response(404, { error: "NoteNotFound", message: "no note named 'New.md'" }),
		});
		const { controller, root } = panel();
		controller.noteChanged(note("New.md"));
		await until(() => /not in the index yet/.test(root.textContent ?? ""), "the message");
		expect(notices).toEqual([]);
	});
});
