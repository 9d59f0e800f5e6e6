// "Start the server": the plugin runs the real `vaultctx serve` for its vault, finds it
// through server.json, and stops what it started when it unloads.

import { existsSync } from "fs";
import * as path from "path";

import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import VaultctxPlugin from "../../src/main";
import { ServerProcess } from "../../src/process";
import { until } from "../helpers";
import { App, notices, Plugin } from "../obsidian-stub";
import { exampleVault, RealServer, serverEnv, VAULTCTX } from "./real-server";

let where: { vault: string; home: string };
let app: App;
let plugin: VaultctxPlugin;

function alive(pid: number): boolean {
	try {
		process.kill(pid, 0);
		return true;
	} catch {
		return false;
	}
}

beforeAll(() => {
	where = exampleVault();
	// The server the plugin starts inherits Obsidian's environment.
	Object.assign(process.env, serverEnv(where.home));
});

beforeEach(async () => {
	notices.length = 0;
	app = new App(where.vault);
	plugin = new VaultctxPlugin(app as never, { id: "vaultctx", version: "0.1.0" } as never);
	await plugin.onload();
	plugin.settings.executable = VAULTCTX;
	plugin.settings.serveArgs = "--no-embed";
});

afterEach(() => {
	(plugin as unknown as Plugin).unload();
});

const serverJson = () => path.join(where.vault, ".vaultctx", "server.json");

describe("start the server", () => {
	it("runs vaultctx serve for this vault, connects, and stops it when the plugin unloads", async () => {
		expect(existsSync(serverJson())).toBe(false);
		await plugin.startServer();
		const pid = plugin.server.pid!;
		expect(alive(pid)).toBe(true);
		expect(notices).toEqual([expect.stringMatching(/^vaultctx: started the server for this vault on 127\.0\.0\.1:\d+\.$/)]);
		expect(plugin.statusText).toMatch(/^vaultctx: (connected|indexing…)$/);
		const status = await plugin.client.status();
		expect(status.server?.pid).toBe(pid);
		expect(status.notes).toBe(54);

		(plugin as unknown as Plugin).unload();
		await until(() => !alive(pid), "the server to stop", 20_000);
		expect(existsSync(serverJson())).toBe(false); // it cleaned up after itself
	});

	it("does not start a second server when one runs", async () => {
		const running = await RealServer.start(where);
		try {
			await plugin.startServer();
			expect(plugin.server.running).toBe(false);
			expect(notices).toEqual(["vaultctx: the server for this vault is already running."]);
			(plugin as unknown as Plugin).unload();
			expect(running.running).toBe(true); // not ours to stop
		} finally {
			await running.stop();
		}
	});

	it("says so when the executable cannot be found", async () => {
		plugin.settings.executable = "/nowhere/vaultctx";
		await plugin.startServer();
		expect(notices).toEqual([
			"vaultctx: could not find the executable “/nowhere/vaultctx”. " +
				"Set the full path of vaultctx in the plugin's settings (e.g. ~/.local/bin/vaultctx).",
		]);
		expect(plugin.statusText).toBe("vaultctx: not running");
	});

	it("passes on why the server would not start", async () => {
		plugin.settings.serveArgs = "--no-such-option";
		await plugin.startServer();
		expect(notices).toHaveLength(1);
		expect(notices[0]).toMatch(/^vaultctx: the server exited with code 2: .*No such option '--no-such-option'/);
	});
});

describe("ServerProcess", () => {
	it("stops only what it started", async () => {
		const processes = new ServerProcess();
		expect(processes.stop()).toBe(false);
		const info = await processes.start({ executable: VAULTCTX, vaultPath: where.vault, extraArgs: ["--no-embed"] });
		expect(info.pid).toBe(processes.pid);
		expect(processes.stop()).toBe(true);
		expect(await processes.exited()).toBe(true);
		expect(processes.running).toBe(false);
	});
});
