// A real `vaultctx serve` for the integration and browser tests: the venv's vaultctx
// ($VAULTCTX_BIN, which `make test` passes), on a temporary copy of examples/vault, any free
// port on 127.0.0.1, its own config folder (token) and text-only indexing (--no-embed).

import { ChildProcess, execFileSync, spawn } from "child_process";
import { cpSync, existsSync, mkdirSync, readFileSync } from "fs";
import * as path from "path";

import { readServerFile } from "../../src/discovery";
import { tempDir, until } from "../helpers";

export const REPO = path.resolve(__dirname, "../../../..");
export const EXAMPLE_VAULT = path.join(REPO, "examples", "vault");
export const VAULTCTX = process.env.VAULTCTX_BIN || path.join(REPO, ".venv", "bin", "vaultctx");

if (!existsSync(VAULTCTX)) {
	throw new Error(`no vaultctx at ${VAULTCTX}: run \`make install\`, or set VAULTCTX_BIN`);
}

// One install per test file (its own process): every server it starts keeps its token in
// this config folder, where the plugin under test reads it, as on a user's machine.
export const INSTALL_CONFIG = tempDir("vaultctx-install-");
process.env.VAULTCTX_CONFIG_DIR = INSTALL_CONFIG;

/** The environment of every vaultctx the tests run: offline, everything in `home` but the
 * install's token. */
export function serverEnv(home: string): NodeJS.ProcessEnv {
	return {
		...process.env,
		VAULTCTX_CONFIG_DIR: INSTALL_CONFIG,
		VAULTCTX_ACCOUNT_DIR: path.join(home, "account"),
		VAULTCTX_CACHE_DIR: path.join(home, "cache"),
		HF_HUB_OFFLINE: "1",
		LITELLM_LOCAL_MODEL_COST_MAP: "True",
		TOKENIZERS_PARALLELISM: "false",
	};
}

export interface ServedVault {
	vault: string;
	home: string;
	/** Indexed with embeddings too (a few seconds more), and served with them. */
	embed?: boolean;
}

/** A copy of examples/vault, indexed (text and links; with `embed`, embeddings too), in a
 * fresh temporary folder. */
export function exampleVault(home = tempDir(), embed = false): ServedVault {
	const vault = path.join(home, "vault");
	cpSync(EXAMPLE_VAULT, vault, { recursive: true, filter: (src) => path.basename(src) !== ".vaultctx" });
	mkdirSync(path.join(home, "config"), { recursive: true });
	const args = ["index", vault, ...(embed ? [] : ["--no-embed"])];
	execFileSync(VAULTCTX, args, { env: serverEnv(home), stdio: "ignore" });
	return { vault, home, embed };
}

export class RealServer {
	private exited = false;

	private constructor(
		readonly vault: string,
		readonly home: string,
		readonly process: ChildProcess,
		readonly port: number,
		readonly tokenPath: string,
	) {
		process.once("exit", () => (this.exited = true));
	}

	/** Start `vaultctx serve VAULT --port 0 [--no-embed]` and wait for its server.json. */
	static async start(where: ServedVault = exampleVault()): Promise<RealServer> {
		const { vault, home } = where;
		const args = ["serve", vault, "--port", "0", ...(where.embed ? [] : ["--no-embed"])];
		const child = spawn(VAULTCTX, args, {
			env: serverEnv(home),
			stdio: ["ignore", "ignore", "pipe"],
		});
		let stderr = "";
		child.stderr!.on("data", (chunk) => (stderr += chunk));
		let info = await readServerFile(vault);
		await until(
			async () => {
				if (child.exitCode !== null) throw new Error(`vaultctx serve exited: ${stderr}`);
				info = await readServerFile(vault);
				return info !== null && info.pid === child.pid;
			},
			"vaultctx serve to announce itself",
			60_000,
		);
		return new RealServer(vault, home, child, info!.port, path.join(INSTALL_CONFIG, "token"));
	}

	get pid(): number {
		return this.process.pid!;
	}

	get token(): string {
		return readFileSync(this.tokenPath, "utf8").trim();
	}

	get running(): boolean {
		return !this.exited;
	}

	/** SIGTERM, as a user's Ctrl-C: the server removes its server.json. */
	async stop(): Promise<void> {
		if (this.exited) return;
		this.process.kill("SIGCONT");
		this.process.kill("SIGTERM");
		await until(() => this.exited, "vaultctx serve to exit", 20_000);
	}

	/** SIGKILL: the server dies and leaves a stale server.json behind. */
	async kill(): Promise<void> {
		this.process.kill("SIGKILL");
		await until(() => this.exited, "vaultctx serve to die", 20_000);
	}

	/** Freeze the process: it accepts connections (the kernel does) but never answers. */
	pause(): void {
		this.process.kill("SIGSTOP");
	}

	resume(): void {
		this.process.kill("SIGCONT");
	}
}
