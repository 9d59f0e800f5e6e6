// Finding the vault's own server the way the CLI does (src/vaultctx/server/client.py and
// auth.py): `<vault>/.vaultctx/server.json` names the port; the token is read only from this
// install's own token file (never from a path server.json names), and only when it is a
// private file of this user; and the server proves it holds that token, for this vault and
// port, before the token or any question is sent to it.

import { createHmac, randomBytes } from "crypto";
import { constants, promises as fs } from "fs";
import { homedir } from "os";
import * as path from "path";

import { problems } from "./problems";

export const SERVER_FILE = path.join(".vaultctx", "server.json");

/** What server.json says about a running server. */
export interface ServerInfo {
	port: number;
	pid: number;
	vault: string;
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
	const { port, pid, vault } = data as Record<string, unknown>;
	// Only a port number is taken from the file: the host is always 127.0.0.1.
	if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) return null;
	if (typeof pid !== "number" || !Number.isInteger(pid)) return null;
	if (typeof vault !== "string") return null;
	return { port, pid, vault };
}

/** vaultctx's config folder, as `auth.config_dir()` finds it: `$VAULTCTX_CONFIG_DIR`, else
 * the platform's user config folder (platformdirs' `user_config_dir("vaultctx")`). */
export function configDir(
	env: NodeJS.ProcessEnv = process.env,
	platform: NodeJS.Platform = process.platform,
	home: string = homedir(),
): string {
	const expand = (p: string) => (p === "~" || p.startsWith("~/") ? path.join(home, p.slice(1)) : p);
	if (env.VAULTCTX_CONFIG_DIR) return expand(env.VAULTCTX_CONFIG_DIR);
	if (platform === "darwin") return path.join(home, "Library", "Application Support", "vaultctx");
	if (platform === "win32") {
		const local = env.LOCALAPPDATA || path.join(home, "AppData", "Local");
		return path.join(local, "vaultctx", "vaultctx");
	}
	const xdg = env.XDG_CONFIG_HOME?.trim();
	return path.join(xdg ? expand(xdg) : path.join(home, ".config"), "vaultctx");
}

/** The install's token file, where `vaultctx serve` keeps it. */
export function tokenFile(dir: string = configDir()): string {
	return path.join(dir, "token");
}

/** The token: the first line of the install's token file, if it is a regular file (not a
 * symlink), of this user, mode 0600; anything else is a wrong-token problem. */
export async function readToken(file: string = tokenFile()): Promise<string> {
	let text: string;
	try {
		const handle = await fs.open(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
		try {
			const info = await handle.stat();
			const mine = process.getuid === undefined || info.uid === process.getuid();
			const private_ = process.platform === "win32" || (info.mode & 0o777) === 0o600;
			if (!info.isFile() || !mine || !private_) {
				throw problems.wrongToken(
					`the token file ${file} is not this user's private file (a regular file, mode 0600)`,
				);
			}
			text = await handle.readFile("utf8");
		} finally {
			await handle.close();
		}
	} catch (error) {
		if (!(error instanceof Error) || error.name === "ServerProblem") throw error;
		const code = (error as NodeJS.ErrnoException).code ?? String(error);
		const why = code === "ELOOP" ? "it is a symlink" : code;
		throw problems.wrongToken(`cannot read the token file ${file}: ${why}`);
	}
	const token = text.trim();
	if (!token) throw problems.wrongToken(`the token file ${file} is empty`);
	return token;
}

/** A fresh challenge for `GET /health?challenge=`. */
export function newChallenge(): string {
	return randomBytes(16).toString("hex");
}

/** What a server holding `token` answers to `challenge` on `port` (auth.proofs): `server`
 * proves it holds the token, `vault` that it also serves `vault`. */
export function proofs(token: string, challenge: string, port: number, vault: string): { server: string; vault: string } {
	const said = `${challenge}\n${port}`;
	const hmac = (message: string) => createHmac("sha256", token).update(message, "utf8").digest("hex");
	return { server: hmac(said), vault: hmac(`${said}\n${vault}`) };
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
