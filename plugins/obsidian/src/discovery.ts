// Finding the vault's own server the way the CLI does (src/vaultctx/server/client.py):
// `<vault>/.vaultctx/server.json` = {"port", "pid", "vault", "token_path"}, and the token is
// the text of the (0600) file at `token_path`.

import { promises as fs } from "fs";
import * as path from "path";

import { problems } from "./problems";

export const SERVER_FILE = path.join(".vaultctx", "server.json");

/** What server.json says about a running server. */
export interface ServerInfo {
	port: number;
	pid: number;
	vault: string;
	tokenPath: string;
}

export function serverFile(vaultPath: string): string {
	return path.join(vaultPath, SERVER_FILE);
}

/** server.json parsed and checked, or null when it is missing or not a server's. */
export async function readServerFile(vaultPath: string): Promise<ServerInfo | null> {
	let raw: string;
	try {
		raw = await fs.readFile(serverFile(vaultPath), "utf8");
	} catch {
		return null;
	}
	return parseServerInfo(raw);
}

export function parseServerInfo(raw: string): ServerInfo | null {
	let data: unknown;
	try {
		data = JSON.parse(raw);
	} catch {
		return null;
	}
	if (typeof data !== "object" || data === null) return null;
	const { port, pid, vault, token_path } = data as Record<string, unknown>;
	// Only a port number is taken from the file: the host is always 127.0.0.1.
	if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) return null;
	if (typeof pid !== "number" || !Number.isInteger(pid)) return null;
	if (typeof vault !== "string" || typeof token_path !== "string" || !token_path) return null;
	return { port, pid, vault, tokenPath: token_path };
}

/** The server's token: the first line of its token file. */
export async function readToken(info: ServerInfo): Promise<string> {
	let text: string;
	try {
		text = await fs.readFile(info.tokenPath, "utf8");
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code ?? String(error);
		throw problems.wrongToken(`cannot read the token file ${info.tokenPath}: ${code}`);
	}
	const token = text.trim();
	if (!token) throw problems.wrongToken(`the token file ${info.tokenPath} is empty`);
	return token;
}

/** The vault folder as the server names it: absolute, symlinks resolved. */
export async function realVaultPath(vaultPath: string): Promise<string> {
	try {
		return await fs.realpath(vaultPath);
	} catch {
		return path.resolve(vaultPath);
	}
}

export async function sameFolder(a: string, b: string): Promise<boolean> {
	const [x, y] = await Promise.all([realVaultPath(a), realVaultPath(b)]);
	return x === y;
}
