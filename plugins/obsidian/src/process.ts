// Starting `vaultctx serve` for the vault when none runs, and stopping what the plugin
// started when it unloads. The server announces itself in `.vaultctx/server.json`.

import { ChildProcess, spawn } from "child_process";

import { readServerFile, ServerInfo } from "./discovery";
import { formatSeconds } from "./problems";

export const START_TIMEOUT_MS = 60_000;
const POLL_MS = 100;
const STDERR_KEPT = 2000;

export interface StartOptions {
	/** The vaultctx executable (a name on PATH or a full path). */
	executable: string;
	vaultPath: string;
	/** More arguments for `serve`, e.g. `--no-embed`. */
	extraArgs?: string[];
	env?: NodeJS.ProcessEnv;
	timeoutMs?: number;
}

/** Why the server could not be started, as a sentence for a notice. */
export class StartFailed extends Error {
	constructor(message: string) {
		super(message);
		this.name = "StartFailed";
	}
}

/** The arguments of `serve`: this vault, any free port on 127.0.0.1. */
export function serveArgs(vaultPath: string, extraArgs: string[] = []): string[] {
	return ["serve", vaultPath, "--port", "0", ...extraArgs];
}

/** Split the settings' "extra arguments" field (spaces separate; quotes group). */
export function splitArgs(text: string): string[] {
	const args: string[] = [];
	const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
	let match: RegExpExecArray | null;
	while ((match = pattern.exec(text)) !== null) args.push(match[1] ?? match[2] ?? match[3]);
	return args;
}

export class ServerProcess {
	private child: ChildProcess | null = null;
	private stderr = "";
	private exit: { code: number | null; signal: string | null } | null = null;
	private spawnError: Error | null = null;

	/** The process this plugin started, while it runs. */
	get pid(): number | null {
		return this.child && this.exit === null ? (this.child.pid ?? null) : null;
	}

	get running(): boolean {
		return this.pid !== null;
	}

	/** Start the server and resolve once it has announced itself in server.json. */
	async start(options: StartOptions): Promise<ServerInfo> {
		if (this.running) throw new StartFailed("vaultctx: the server this plugin started is still running.");
		const before = await readServerFile(options.vaultPath);
		this.stderr = "";
		this.exit = null;
		this.spawnError = null;
		const child = spawn(options.executable, serveArgs(options.vaultPath, options.extraArgs), {
			cwd: options.vaultPath,
			env: options.env ?? process.env,
			stdio: ["ignore", "ignore", "pipe"],
			windowsHide: true,
		});
		this.child = child;
		child.stderr?.setEncoding("utf8");
		child.stderr?.on("data", (chunk: string) => {
			this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT);
		});
		child.on("error", (error) => {
			this.spawnError = error;
		});
		child.on("exit", (code, signal) => {
			this.exit = { code, signal };
		});
		const timeout = options.timeoutMs ?? START_TIMEOUT_MS;
		const deadline = Date.now() + timeout;
		for (;;) {
			await sleep(POLL_MS);
			if (this.spawnError) {
				this.child = null;
				throw new StartFailed(spawnMessage(options.executable, this.spawnError));
			}
			const info = await readServerFile(options.vaultPath);
			// A fresh announcement: ours (same pid) or at least not the stale file seen before.
			if (info && (info.pid === child.pid || (before === null || info.pid !== before.pid))) {
				if (this.exit === null) return info;
			}
			if (this.exit !== null) {
				this.child = null;
				throw new StartFailed(exitMessage(this.exit, this.stderr));
			}
			if (Date.now() > deadline) {
				this.stop();
				throw new StartFailed(
					`vaultctx: the server did not announce itself within ${formatSeconds(timeout)}; it was stopped.`,
				);
			}
		}
	}

	/** Stop the process this plugin started (SIGTERM: the server removes its server.json). */
	stop(): boolean {
		const child = this.child;
		if (!child || this.exit !== null) return false;
		child.kill("SIGTERM");
		return true;
	}

	/** Resolves once the started process has exited (or at once when none runs). */
	exited(timeoutMs = 10_000): Promise<boolean> {
		const child = this.child;
		if (!child || this.exit !== null) return Promise.resolve(true);
		return new Promise((resolve) => {
			const timer = setTimeout(() => resolve(false), timeoutMs);
			child.once("exit", () => {
				clearTimeout(timer);
				resolve(true);
			});
		});
	}
}

function spawnMessage(executable: string, error: Error): string {
	const code = (error as NodeJS.ErrnoException).code;
	if (code === "ENOENT") {
		return (
			`vaultctx: could not find the executable “${executable}”. ` +
			"Set the full path of vaultctx in the plugin's settings (e.g. ~/.local/bin/vaultctx)."
		);
	}
	return `vaultctx: could not run “${executable}”: ${error.message}`;
}

function exitMessage(exit: { code: number | null; signal: string | null }, stderr: string): string {
	const how = exit.signal ? `was stopped by ${exit.signal}` : `exited with code ${exit.code}`;
	const said = stderr.trim().split("\n").filter(Boolean).pop();
	return `vaultctx: the server ${how}${said ? `: ${said}` : ""}`;
}

function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}
