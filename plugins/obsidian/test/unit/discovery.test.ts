import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "fs";
import * as path from "path";

import { describe, expect, it } from "vitest";

import {
	configDir,
	parseServerInfo,
	readServerFile,
	readToken,
	realVaultPath,
	sameFolder,
	tokenFile,
} from "../../src/discovery";
import { ServerProblem } from "../../src/problems";
import { fakeVault, tempDir } from "../helpers";

describe("server.json", () => {
	it("is read as the CLI reads it", async () => {
		const vault = fakeVault(43210);
		expect(await readServerFile(vault.root)).toEqual({
			port: 43210,
			pid: 4242,
			vault: vault.root,
		});
	});

	it("missing means no server", async () => {
		expect(await readServerFile(tempDir())).toBeNull();
	});

	it.each([
		["not JSON", "{port: 1"],
		["a list", "[1, 2]"],
		["a port that is text", '{"port": "evil.example:80", "pid": 1, "vault": "/v", "token_path": "/t"}'],
		["port 0", '{"port": 0, "pid": 1, "vault": "/v", "token_path": "/t"}'],
		["a port past 65535", '{"port": 70000, "pid": 1, "vault": "/v", "token_path": "/t"}'],
		["a fractional port", '{"port": 80.5, "pid": 1, "vault": "/v", "token_path": "/t"}'],
		["no pid", '{"port": 8765, "vault": "/v", "token_path": "/t"}'],
	])("is refused when it holds %s", (_, raw) => {
		expect(parseServerInfo(raw)).toBeNull();
	});
});

describe("the token", () => {
	it("is the install's token file's text, trimmed, wherever server.json says it is", async () => {
		const vault = fakeVault(1, "  abc123  ");
		writeFileSync(path.join(vault.root, "elsewhere"), "not the token\n", { mode: 0o600 });
		writeFileSync(
			path.join(vault.root, ".vaultctx", "server.json"),
			JSON.stringify({ port: 1, pid: 1, vault: vault.root, token_path: path.join(vault.root, "elsewhere") }),
		);
		expect(tokenFile()).toBe(vault.tokenPath);
		expect(await readToken()).toBe("abc123");
	});

	it("unreadable or empty is a wrong-token problem naming the file", async () => {
		const vault = fakeVault();
		const missing = path.join(vault.root, "nope");
		await expect(readToken(missing)).rejects.toMatchObject({ kind: "wrong-token" });
		await expect(readToken(missing)).rejects.toThrow(/nope: ENOENT/);
		writeFileSync(vault.tokenPath, "\n");
		const error = await readToken().catch((e: unknown) => e);
		expect(error).toBeInstanceOf(ServerProblem);
		expect((error as ServerProblem).message).toMatch(/is empty/);
	});

	it("is refused from a file others may read, or a symlink", async () => {
		const vault = fakeVault();
		chmodSync(vault.tokenPath, 0o644);
		await expect(readToken()).rejects.toThrow(/not this user's private file/);
		chmodSync(vault.tokenPath, 0o600);
		const copy = path.join(vault.root, "copy");
		writeFileSync(copy, "secret-token\n", { mode: 0o600 });
		rmSync(vault.tokenPath);
		symlinkSync(copy, vault.tokenPath);
		await expect(readToken()).rejects.toThrow(/it is a symlink/);
	});
});

describe("the config folder", () => {
	it("is found as vaultctx finds it", () => {
		expect(configDir({ VAULTCTX_CONFIG_DIR: "~/vx" }, "linux", "/home/a")).toBe("/home/a/vx");
		expect(configDir({}, "linux", "/home/a")).toBe("/home/a/.config/vaultctx");
		expect(configDir({ XDG_CONFIG_HOME: "/x" }, "linux", "/home/a")).toBe("/x/vaultctx");
		expect(configDir({}, "darwin", "/Users/a")).toBe("/Users/a/Library/Application Support/vaultctx");
	});
});

describe("the vault's real path", () => {
	it("resolves symlinks, as the server names its vault", async () => {
		const root = tempDir();
		mkdirSync(path.join(root, "real"));
		symlinkSync(path.join(root, "real"), path.join(root, "link"));
		expect(await realVaultPath(path.join(root, "link"))).toBe(path.join(root, "real"));
		expect(await sameFolder(path.join(root, "link"), path.join(root, "real"))).toBe(true);
		expect(await sameFolder(path.join(root, "link"), root)).toBe(false);
	});
});
