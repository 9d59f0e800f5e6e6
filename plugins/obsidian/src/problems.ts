// Everything that can go wrong between the plugin and its server, each with the one
// sentence a user reads in a Notice (never only in the console).

export type ProblemKind =
	| "not-running" // no server.json, or nothing answers on its port
	| "wrong-token" // the server refuses our bearer token, or the token file is unreadable
	| "other-vault" // the server on that port serves another vault
	| "old-server" // a vaultctx too old for this plugin (no version, or no /related)
	| "timeout" // no answer in time
	| "not-found" // the note is unknown to the index, or hidden by the vault's policy
	| "failed"; // any other error the server reports, or an answer that is not its JSON

export class ServerProblem extends Error {
	constructor(
		readonly kind: ProblemKind,
		message: string,
		readonly status?: number,
	) {
		super(message);
		this.name = "ServerProblem";
	}
}

/** The oldest server this plugin talks to: `/health` names vault and version with the token. */
export const MIN_SERVER_VERSION = "0.1.0";

export const problems = {
	notRunning(detail: string): ServerProblem {
		return new ServerProblem(
			"not-running",
			`vaultctx: no server is running for this vault (${detail}). ` +
				"Run the command “vaultctx: Start the server”, or `vaultctx serve` in a terminal.",
		);
	},
	wrongToken(detail: string): ServerProblem {
		return new ServerProblem(
			"wrong-token",
			`vaultctx: the server refused this plugin's token (${detail}). ` +
				"Restart `vaultctx serve` for this vault as the same user, with the same VAULTCTX_CONFIG_DIR.",
			401,
		);
	},
	otherVault(port: number, theirs: string, ours: string): ServerProblem {
		return new ServerProblem(
			"other-vault",
			`vaultctx: the server on 127.0.0.1:${port} serves another vault (${theirs}), not ${ours}. ` +
				"Stop it, or start a server for this vault.",
		);
	},
	oldServer(detail: string): ServerProblem {
		return new ServerProblem(
			"old-server",
			`vaultctx: the running server is too old for this plugin (${detail}). ` +
				`Upgrade vaultctx to ${MIN_SERVER_VERSION} or later and restart the server.`,
		);
	},
	timeout(what: string, ms: number): ServerProblem {
		return new ServerProblem(
			"timeout",
			`vaultctx: the server did not answer ${what} within ${formatSeconds(ms)}. ` +
				"It may be busy (indexing, loading the model); it is tried again on the next request.",
		);
	},
	notFound(message: string): ServerProblem {
		return new ServerProblem("not-found", `vaultctx: ${message}`, 404);
	},
	failed(what: string, message: string, status?: number): ServerProblem {
		return new ServerProblem("failed", `vaultctx: ${what} failed: ${message}`, status);
	},
};

export function formatSeconds(ms: number): string {
	const s = ms / 1000;
	return `${Number.isInteger(s) ? s : Number(s.toFixed(2))} s`;
}

/** Any error as a ServerProblem (a bug in the plugin still reaches the user as a notice). */
export function asProblem(error: unknown, what: string): ServerProblem {
	if (error instanceof ServerProblem) return error;
	const message = error instanceof Error ? error.message : String(error);
	return problems.failed(what, message);
}

/** -1, 0 or 1 as `a` is older than, equal to or newer than `b` (dotted numbers; a missing
 * or non-numeric part counts as 0). */
export function compareVersions(a: string, b: string): number {
	const parts = (v: string) => v.split(/[.+-]/).slice(0, 3).map((p) => parseInt(p, 10) || 0);
	const [x, y] = [parts(a), parts(b)];
	for (let i = 0; i < 3; i++) {
		const d = (x[i] ?? 0) - (y[i] ?? 0);
		if (d !== 0) return d < 0 ? -1 : 1;
	}
	return 0;
}
