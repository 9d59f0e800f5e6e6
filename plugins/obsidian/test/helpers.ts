// Shared by the unit tests: a vault folder on disk with a server's announcement, and the
// stand-in's records reset between tests.

import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "fs";
import { tmpdir } from "os";
import * as path from "path";

import { notices, requests, response, setRequestHandler, RequestUrlParam, RequestUrlResponse } from "./obsidian-stub";

import { proofs } from "../src/discovery";
import type { Candidate, Selection } from "../src/types";

export function tempDir(prefix = "vaultctx-test-"): string {
	return realpathSync(mkdtempSync(path.join(tmpdir(), prefix)));
}

export interface FakeVault {
	root: string;
	tokenPath: string;
	token: string;
	announce(port: number, pid?: number, vault?: string): void;
}

/** A vault folder whose server.json names `port`, and the install's token file (0600) in a
 * config folder of its own, which $VAULTCTX_CONFIG_DIR names for the test. */
export function fakeVault(port = 40000, token = "secret-token"): FakeVault {
	const root = tempDir();
	mkdirSync(path.join(root, ".vaultctx"));
	const config = tempDir("vaultctx-config-");
	process.env.VAULTCTX_CONFIG_DIR = config;
	const tokenPath = path.join(config, "token");
	writeFileSync(tokenPath, `${token}\n`, { mode: 0o600 });
	const vault: FakeVault = {
		root,
		tokenPath,
		token,
		announce(p: number, pid = 4242, v = root) {
			writeFileSync(
				path.join(root, ".vaultctx", "server.json"),
				JSON.stringify({ port: p, pid, vault: v, token_path: tokenPath }),
			);
		},
	};
	vault.announce(port);
	return vault;
}

export type Route = (request: RequestUrlParam, body: any) => RequestUrlResponse | Promise<RequestUrlResponse>;

/** Answer the stand-in's requestUrl like a vaultctx server of `vault` would, with `routes`
 * overriding or adding routes ("GET /health", "POST /related", ...). */
export function serveFake(vault: FakeVault, routes: Record<string, Route> = {}, version = "0.1.0"): void {
	const defaults: Record<string, Route> = {
		"GET /health": (req) => {
			const url = new URL(req.url);
			const challenge = url.searchParams.get("challenge");
			if (req.headers?.Authorization === `Bearer ${vault.token}`) {
				return response(200, { ok: true, vault: vault.root, pid: 4242, version });
			}
			if (challenge === null) return response(200, { ok: true });
			return response(200, { ok: true, proof: proofs(vault.token, challenge, Number(url.port), vault.root) });
		},
		"GET /status": () => response(200, { notes: 3, server: { pid: 4242, watching: true, indexing: false } }),
	};
	const all = { ...defaults, ...routes };
	setRequestHandler(async (req) => {
		const url = new URL(req.url);
		const route = all[`${req.method ?? "GET"} ${url.pathname}`];
		if (route === undefined) return response(404, { error: "NotFound", message: "Not Found" });
		if (url.pathname !== "/health" && req.headers?.Authorization !== `Bearer ${vault.token}`) {
			return response(401, { error: "Unauthorized", message: "missing or wrong bearer token" });
		}
		return route(req, req.body ? JSON.parse(String(req.body)) : undefined);
	});
}

export function resetStub(): void {
	setRequestHandler(null);
	requests.length = 0;
	notices.length = 0;
}

export function candidate(path: string, extra: Partial<Candidate> = {}): Candidate {
	const title = path.replace(/\.md$/, "").split("/").pop()!;
	return {
		id: `block:${path}`,
		kind: "block",
		path,
		title,
		heading: "Notes",
		heading_path: `${title} > Notes`,
		text: `Some text about ${title}.`,
		score: 0.5,
		start_line: 3,
		end_line: 4,
		sources: { lexical: { rank: 1, score: 3.2 } },
		...extra,
	};
}

export function selection(query: string, candidates: Candidate[]): Selection {
	return { query, candidates, diagnostics: { select_ms: 1 } };
}

/** A promise and its resolve, to hold an answer back. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
	let resolve!: (value: T) => void;
	const promise = new Promise<T>((r) => (resolve = r));
	return { promise, resolve };
}

export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Wait until `check` holds (polling), or fail with `what`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (!(await check())) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await sleep(20);
	}
}
