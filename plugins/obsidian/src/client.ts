// The plugin's one way to reach its server: Obsidian's `requestUrl` (the server keeps its
// strict CORS), to 127.0.0.1 only, with the bearer token once the server proved it is this
// vault's, and a time limit on every request.

import { isAbsolute } from "path";

import { requestUrl, RequestUrlParam, RequestUrlResponse } from "obsidian";

import { newChallenge, proofs, readServerFile, readToken, realVaultPath } from "./discovery";
import {
	compareVersions,
	MIN_SERVER_VERSION,
	problems,
	ServerProblem,
} from "./problems";
import type { Focus, Health, Selection, ServerStatus, SessionContext } from "./types";

/** The only host the plugin ever sends a request to. */
export const HOST = "127.0.0.1";

export type Transport = (request: RequestUrlParam) => Promise<RequestUrlResponse>;

/** How the link to the server stands, for the status bar. */
export type LinkState = "connected" | "not-running" | "problem";

export interface ClientOptions {
	/** The vault's folder (FileSystemAdapter.getBasePath()). */
	vaultPath: string;
	/** Time limit of one request, read at each request (settings may change). */
	timeoutMs: () => number;
	transport?: Transport;
	/** Told after each request how the link stands. */
	onLinkState?: (state: LinkState, problem?: ServerProblem) => void;
}

export interface Connection {
	port: number;
	token: string;
	health: Health;
}

export interface SearchOptions {
	k?: number;
	noVectors?: boolean;
}

/** Problems that a fresh look at server.json may cure (the server restarted elsewhere). */
const RETRY_FRESH = new Set(["not-running", "wrong-token"]);
/** Problems after which the cached connection is no longer trusted. */
const FORGET = new Set(["not-running", "wrong-token", "other-vault", "old-server"]);

export class VaultctxClient {
	private connection: Promise<Connection> | null = null;
	private readonly transport: Transport;

	constructor(private readonly options: ClientOptions) {
		this.transport = options.transport ?? ((request) => requestUrl(request));
	}

	/** Notes related to the open note (recorded as open first when `touch`). */
	related(note: string, options: SearchOptions & { touch?: boolean } = {}): Promise<Selection> {
		const body = {
			note,
			k: options.k ?? 10,
			no_vectors: options.noVectors ?? false,
			touch: options.touch ?? true,
		};
		return this.request<Selection>("POST", "/related", body);
	}

	select(query: string, options: SearchOptions = {}): Promise<Selection> {
		const body = { query, k: options.k ?? 10, no_vectors: options.noVectors ?? false };
		return this.request<Selection>("POST", "/select", body);
	}

	context(
		query: string,
		options: SearchOptions & { budget?: number | null } = {},
	): Promise<SessionContext> {
		const body: Record<string, unknown> = {
			query,
			k: options.k ?? 30,
			no_vectors: options.noVectors ?? false,
		};
		if (options.budget) body.budget = options.budget;
		return this.request<SessionContext>("POST", "/context", body);
	}

	/** The notes later selects lean towards, each with its weight now. */
	focus(): Promise<Focus> {
		return this.request<Focus>("GET", "/focus");
	}

	/** Forget every note recorded as open: later answers rank by the question alone. */
	clearFocus(): Promise<Focus> {
		return this.request<Focus>("DELETE", "/focus");
	}

	status(): Promise<ServerStatus> {
		return this.request<ServerStatus>("GET", "/status");
	}

	/** Forget the checked connection: the next request reads server.json again. */
	reset(): void {
		this.connection = null;
	}

	/** The checked connection to this vault's server (found and verified once, then reused). */
	connect(): Promise<Connection> {
		if (this.connection === null) {
			const attempt = this.open();
			this.connection = attempt;
			attempt.catch(() => {
				if (this.connection === attempt) this.connection = null;
			});
		}
		return this.connection;
	}

	async request<T>(method: "GET" | "POST" | "DELETE", route: string, body?: unknown): Promise<T> {
		try {
			const value = await this.requestOnce<T>(method, route, body);
			this.options.onLinkState?.("connected");
			return value;
		} catch (error) {
			if (error instanceof ServerProblem) {
				const state = error.kind === "not-running" ? "not-running" : "problem";
				if (error.kind !== "not-found") this.options.onLinkState?.(state, error);
			}
			throw error;
		}
	}

	private async requestOnce<T>(method: string, route: string, body?: unknown): Promise<T> {
		for (let attempt = 0; ; attempt++) {
			const reused = this.connection !== null;
			const connection = await this.connect();
			try {
				return await this.send<T>(connection, method, route, body);
			} catch (error) {
				if (error instanceof ServerProblem && FORGET.has(error.kind)) {
					if (this.connection !== null && (await this.connection.catch(() => null)) === connection) {
						this.connection = null;
					}
					if (reused && attempt === 0 && RETRY_FRESH.has(error.kind)) continue;
				}
				throw error;
			}
		}
	}

	/** Find the server in server.json, then make sure it is ours before the token or any
	 * question goes to it: it proves it holds this install's token and serves this very vault
	 * (`GET /health?challenge=`, unauthenticated); then it must take the token and be recent
	 * enough. */
	private async open(): Promise<Connection> {
		const { vaultPath } = this.options;
		if (!isAbsolute(vaultPath)) {
			throw problems.failed("connecting", "this vault has no folder on disk (vaultctx needs Obsidian's desktop app)");
		}
		const info = await readServerFile(vaultPath);
		if (info === null) throw problems.notRunning("no .vaultctx/server.json in the vault");
		const token = await readToken();
		const challenge = newChallenge();
		const open = { port: info.port, token: null };
		const answer = await this.send<Health>(open, "GET", `/health?challenge=${challenge}`);
		const proof = answer.proof;
		if (typeof proof?.server !== "string" || typeof proof.vault !== "string") {
			throw problems.oldServer("its /health answers no challenge");
		}
		if (proof.server !== proofs(token, challenge, info.port, "").server) {
			throw problems.wrongToken(`what answers on ${HOST}:${info.port} does not prove it holds this install's token`);
		}
		const ours = await realVaultPath(vaultPath);
		const names = [...new Set([ours, vaultPath])];
		const partial = { port: info.port, token, health: { ok: false } };
		// Proven ours (it holds the token): it may have the token and say what it serves.
		const health = await this.send<Health>(partial, "GET", "/health");
		if (!names.some((name) => proofs(token, challenge, info.port, name).vault === proof.vault)) {
			throw problems.otherVault(info.port, health.vault ?? "unknown", ours);
		}
		if (typeof health.vault !== "string") throw problems.wrongToken("GET /health did not take the token");
		if (!health.version || compareVersions(health.version, MIN_SERVER_VERSION) < 0) {
			throw problems.oldServer(`version ${health.version || "unknown"}`);
		}
		return { port: info.port, token, health };
	}

	/** One request; with `token: null` (before the server proved it is ours), no token. */
	private async send<T>(
		connection: { port: number; token: string | null },
		method: string,
		route: string,
		body?: unknown,
	): Promise<T> {
		const what = `${method} ${route}`;
		const request: RequestUrlParam = {
			url: `http://${HOST}:${connection.port}${route}`,
			method,
			throw: false,
		};
		if (connection.token !== null) request.headers = { Authorization: `Bearer ${connection.token}` };
		if (body !== undefined) {
			request.contentType = "application/json";
			request.body = JSON.stringify(body);
		}
		const ms = this.options.timeoutMs();
		let response: RequestUrlResponse;
		try {
			response = await withTimeout(this.transport(request), ms, () => problems.timeout(what, ms));
		} catch (error) {
			if (error instanceof ServerProblem) throw error;
			const reason = error instanceof Error ? error.message : String(error);
			throw problems.notRunning(`nothing answers on ${HOST}:${connection.port}: ${reason}`);
		}
		const data = parseJson(response.text);
		if (response.status === 200) {
			if (data === undefined) throw problems.failed(what, "the answer is not JSON", 200);
			return data as T;
		}
		const { error, message } = (data ?? {}) as { error?: string; message?: string };
		const said = error ? `${error}: ${message ?? ""}` : `HTTP ${response.status}`;
		if (response.status === 401) throw problems.wrongToken(`${what} answered 401`);
		if (response.status === 404 && error === "NoteNotFound") {
			throw problems.notFound(message ?? "note not found");
		}
		if (response.status === 404 || response.status === 405) {
			throw problems.oldServer(`it has no ${what}`);
		}
		throw problems.failed(what, said, response.status);
	}
}

function parseJson(text: string | undefined): unknown {
	if (!text) return undefined;
	try {
		return JSON.parse(text);
	} catch {
		return undefined;
	}
}

/** `promise`, or the error `onTimeout` makes after `ms`. `requestUrl` cannot be aborted: a
 * late answer is simply ignored. */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
	return new Promise<T>((resolve, reject) => {
		const timer = setTimeout(() => reject(onTimeout()), ms);
		promise.then(
			(value) => {
				clearTimeout(timer);
				resolve(value);
			},
			(error) => {
				clearTimeout(timer);
				reject(error);
			},
		);
	});
}
