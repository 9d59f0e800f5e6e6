// What the user is told when the real server cannot help: each problem is one clear notice
// (not one per note change), the panel says it too, and things recover by themselves.

import { writeFileSync } from "fs";
import * as path from "path";

import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";

import VaultctxPlugin from "../../src/main";
import { ContextView, VIEW_TYPE } from "../../src/panel";
import { until } from "../helpers";
import { App, notices, Plugin, requests } from "../obsidian-stub";
import { exampleVault, RealServer } from "./real-server";

let server: RealServer;
let app: App;
let plugin: VaultctxPlugin;
let view: ContextView;
const NOTES = [
	"Pests and Diseases/Varroa Mites.md",
	"Equipment/Smoker.md",
	"Hives/Hive 2 - Bramble.md",
	"Hives/Hive 1 - Clover.md",
	"Reference/Bee Biology.md",
	"Pests and Diseases/Thymol Treatment.md",
];
let next = 0;

/** Open the next note of the vault and wait until the panel has answered for it. */
async function openNext(): Promise<string> {
	const note = NOTES[next++ % NOTES.length];
	const started = performance.now();
	app.workspace.openFile(note);
	// The editor never waits for the server: the change is handled without blocking.
	expect(performance.now() - started).toBeLessThan(50);
	await until(
		() => view.controller!.answered === note,
		`the panel's answer for ${note}`,
		15_000,
	);
	return view.controller!.state.kind;
}

const panelText = () => view.contentEl.textContent ?? "";

beforeAll(async () => {
	server = await RealServer.start();
	app = new App(server.vault);
	plugin = new VaultctxPlugin(app as never, { id: "vaultctx", version: "0.1.0" } as never);
	await plugin.onload();
	plugin.settings.timeoutSeconds = 1;
	await plugin.openPanel();
	view = app.workspace.getLeavesOfType(VIEW_TYPE)[0].view as ContextView;
	// Quick note changes are coalesced; these tests want every change asked.
	expect(await openNext()).toBe("results");
});

afterAll(async () => {
	(plugin as unknown as Plugin)?.unload();
	await server?.stop();
	expect(new Set(requests.map((r) => new URL(r.url).hostname))).toEqual(new Set(["127.0.0.1"]));
});

beforeEach(() => {
	notices.length = 0;
});

describe("a problem is one notice, and the panel recovers", () => {
	it("wrong token", async () => {
		const token = server.token;
		writeFileSync(server.tokenPath, "not-the-servers-token\n");
		plugin.client.reset(); // the token is read when connecting (as after Obsidian restarts)
		expect(await openNext()).toBe("problem");
		expect(await openNext()).toBe("problem");
		expect(notices).toEqual([
			`vaultctx: the server refused this plugin's token (what answers on 127.0.0.1:${server.port} does not prove it holds this install's token). ` +
				"Restart `vaultctx serve` for this vault as the same user, with the same VAULTCTX_CONFIG_DIR.",
		]);
		expect(panelText()).toMatch(/refused this plugin's token/);
		expect(plugin.statusText).toBe("vaultctx: problem");
		writeFileSync(server.tokenPath, `${token}\n`);
		expect(await openNext()).toBe("results");
		expect(plugin.statusText).toBe("vaultctx: connected");
	});

	it("a slow server: a timeout, and the editor never waits", async () => {
		server.pause();
		try {
			const started = Date.now();
			expect(await openNext()).toBe("problem");
			expect(Date.now() - started).toBeLessThan(3000);
			expect(await openNext()).toBe("problem");
		} finally {
			server.resume();
		}
		expect(notices).toEqual([
			"vaultctx: the server did not answer POST /related within 1 s. " +
				"It may be busy (indexing, loading the model); it is tried again on the next request.",
		]);
		expect(await openNext()).toBe("results");
	});

	it("a server of another vault", async () => {
		const other = await RealServer.start(exampleVault());
		try {
			// This vault's server.json, pointing at the other vault's server (a synced or copied
			// vault can bring a stale one along).
			writeFileSync(
				path.join(server.vault, ".vaultctx", "server.json"),
				JSON.stringify({ port: other.port, pid: other.pid, vault: server.vault, token_path: other.tokenPath }),
			);
			plugin.client.reset();
			expect(await openNext()).toBe("problem");
			expect(await openNext()).toBe("problem");
			expect(notices).toEqual([
				`vaultctx: the server on 127.0.0.1:${other.port} serves another vault (${other.vault}), not ${server.vault}. ` +
					"Stop it, or start a server for this vault.",
			]);
		} finally {
			writeFileSync(
				path.join(server.vault, ".vaultctx", "server.json"),
				JSON.stringify({ port: server.port, pid: server.pid, vault: server.vault, token_path: server.tokenPath }),
			);
			await other.stop();
		}
		expect(await openNext(), panelText()).toBe("results");
	});

	it("the server stopped: not running, with a button to start it", async () => {
		await server.stop();
		expect(await openNext()).toBe("problem");
		expect(await openNext()).toBe("problem");
		expect(notices).toEqual([
			"vaultctx: no server is running for this vault (no .vaultctx/server.json in the vault). " +
				"Run the command “vaultctx: Start the server”, or `vaultctx serve` in a terminal.",
		]);
		expect(view.contentEl.querySelector("button")!.textContent).toBe("Start the server");
		expect(plugin.statusText).toBe("vaultctx: not running");
	});

	it("the server died and left its server.json: nothing answers on its port", async () => {
		server = await RealServer.start({ vault: server.vault, home: server.home });
		expect(await openNext()).toBe("results");
		notices.length = 0;
		await server.kill();
		expect(await openNext()).toBe("problem");
		expect(notices).toHaveLength(1);
		expect(notices[0]).toMatch(
			new RegExp(`^vaultctx: no server is running for this vault \\(nothing answers on 127\\.0\\.0\\.1:${server.port}: .*ECONNREFUSED`),
		);
	});
});
