// The server's JSON contracts, as the plugin reads them (README: `select`, `context`, `serve`).

/** A retriever's name: the built-in ones, or a plug-in's. */
export type Retriever = string;

export interface SourceRank {
	rank: number;
	score: number;
}

/** One ranked passage of `/select` and `/related`. */
export interface Candidate {
	id: string;
	kind: "block" | "note" | "memory";
	path: string;
	title?: string | null;
	heading?: string | null;
	heading_path?: string | null;
	text: string;
	score: number;
	start_line?: number | null;
	end_line?: number | null;
	tokens?: number;
	sources: Record<Retriever, SourceRank>;
	/** How likely this passage answers the query, in [0, 1] (absolute, not a share of the best). */
	confidence?: number;
}

export interface Selection {
	query: string;
	candidates: Candidate[];
	diagnostics: Record<string, unknown>;
	/** The answer's confidence in [0, 1]; `no_good_match`: the candidates are only the closest. */
	confidence?: number;
	no_good_match?: boolean;
	verdict?: string;
}

/** One note select leans towards (`/focus`): its weight now, halving every half-life. */
export interface FocusNote {
	path: string;
	weight: number;
	how: "opened" | "edited";
	at: string;
}

/** What later selects lean towards (`GET /focus`), or what is left once cleared (`DELETE`). */
export interface Focus {
	notes: FocusNote[];
	half_life_hours: number;
	cleared?: number;
}

/** One item of a SessionContext (`/context`). */
export interface ContextItem {
	id: string;
	kind: "block" | "note" | "memory";
	path?: string | null;
	heading?: string | null;
	heading_path?: string | null;
	text: string;
	tokens?: number;
	reason?: string | null;
	score?: number;
}

export interface SessionContext {
	items: ContextItem[];
	token_count: number;
	budget: number;
	gate: string;
	gate_reason?: string | null;
	context_hash: string;
	diagnostics?: Record<string, unknown>;
}

/** `GET /health` with the token. Without it (or from an old server) only `ok`; asked
 * `?challenge=`, also the proofs that the server holds the token and serves its vault. */
export interface Health {
	ok: boolean;
	vault?: string;
	pid?: number;
	version?: string;
	proof?: { server?: unknown; vault?: unknown };
}

/** `GET /status`: the index's counts and the server's own state. */
export interface ServerStatus {
	notes?: number;
	blocks?: number;
	server?: {
		pid?: number;
		watching?: boolean;
		watch_runs?: number;
		watch_error?: string | null;
		indexing?: boolean;
	};
}
