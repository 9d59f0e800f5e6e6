import { mkdirSync, symlinkSync, writeFileSync } from "fs";
import * as path from "path";

import { describe, expect, it } from "vitest";

import { parseServerInfo, readServerFile, readToken, realVaultPath, sameFolder } from "../../src/discovery";
import { ServerProblem } from "../../src/problems";
import { fakeVault, tempDir } from "../helpers";

describe("server.json", () => {
	it("is read as the CLI reads it", async () => {
		const vault = fakeVault(43210);
		expect(await readServerFile(vault.root)).toEqual({
			port: 43210,
			pid: 4242,
			vault: vault.root,
			tokenPath: vault.tokenPath,
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
		["no token path", '{"port": 8765, "pid": 1, "vault": "/v"}'],
		["no pid", '{"port": 8765, "vault": "/v", "token_path": "/t"}'],
	])("is refused when it holds %s", (_, raw) => {
		expect(parseServerInfo(raw)).toBeNull();
	});
});

describe("the token", () => {
	it("is the token file's text, trimmed", async () => {
		const vault = fakeVault(1, "  abc123  ");
		const info = (await readServerFile(vault.root))!;
		expect(await readToken(info)).toBe("abc123");
	});

	it("unreadable or empty is a wrong-token problem naming the file", async () => {
		const vault = fakeVault();
		const info = (await readServerFile(vault.root))!;
		const missing = { ...info, tokenPath: path.join(vault.root, "nope") };
		await expect(readToken(missing)).rejects.toMatchObject({ kind: "wrong-token" });
		await expect(readToken(missing)).rejects.toThrow(/nope: ENOENT/);
		writeFileSync(info.tokenPath, "\n");
		const error = await readToken(info).catch((e: unknown) => e);
		expect(error).toBeInstanceOf(ServerProblem);
		expect((error as ServerProblem).message).toMatch(/is empty/);
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
