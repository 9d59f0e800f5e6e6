import { rmSync, writeFileSync } from "fs";
import * as http from "http";
import { AddressInfo } from "net";
import * as path from "path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { VaultctxClient, withTimeout } from "../../src/client";
import { proofs } from "../../src/discovery";
import { ServerProblem } from "../../src/problems";
import { candidate, fakeVault, FakeVault, resetStub, selection, serveFake } from "../helpers";
import { requests, response, setRequestHandler } from "../obsidian-stub";

let vault: FakeVault;
const states: string[] = [];

function client(timeoutMs = 1000): VaultctxClient {
	return new VaultctxClient({
		vaultPath: vault.root,
		timeoutMs: () => timeoutMs,
		onLinkState: (state) => states.push(state),
	});
}

async function problemOf(promise: Promise<unknown>): Promise<ServerProblem> {
	const error = await promise.then(
		() => null,
		(e: unknown) => e,
	);
	expect(error).toBeInstanceOf(ServerProblem);
	return error as ServerProblem;
}

beforeEach(() => {
	resetStub();
	states.length = 0;
	vault = fakeVault(43210);
});
afterEach(resetStub);

describe("a request", () => {
	it("goes to 127.0.0.1 on server.json's port, with the bearer token and a JSON body", async () => {
		let body: unknown;
		serveFake(vault, {
			"POST /related": (_, b) => {
				body = b;
				return response(200, selection("a.md", [candidate("b.md")]));
			},
		});
		const answer = await client().related("a.md", { k: 7 });
		expect(answer.candidates.map((c) => c.path)).toEqual(["b.md"]);
		expect(body).toEqual({ note: "a.md", k: 7, no_vectors: false, touch: true });
		const last = requests[requests.length - 1];
		expect(last.url).toBe("http://127.0.0.1:43210/related");
		expect(last.headers).toEqual({ Authorization: "Bearer secret-token" });
		expect(last.contentType).toBe("application/json");
		expect(last.throw).toBe(false);
		expect(states).toEqual(["connected"]);
	});

	it("checks the server once, then reuses the connection", async () => {
		serveFake(vault, { "POST /select": () => response(200, selection("q", [])) });
		const c = client();
		await Promise.all([c.select("one"), c.select("two")]);
		await c.select("three");
		const routes = requests.map((r) => `${r.method} ${new URL(r.url).pathname}`);
		// the challenge, unauthenticated, then /health with the token
		expect(routes).toEqual(["GET /health", "GET /health", "POST /select", "POST /select", "POST /select"]);
		expect(requests[0].url).toMatch(/\/health\?challenge=[0-9a-f]{32}$/);
		expect(requests[0].headers).toBeUndefined();
	});

	it("sends select's and context's options as the server names them", async () => {
		const bodies: unknown[] = [];
		serveFake(vault, {
			"POST /select": (_, b) => (bodies.push(b), response(200, selection("q", []))),
			"POST /context": (_, b) => (bodies.push(b), response(200, { items: [], token_count: 0, budget: 900 })),
		});
		const c = client();
		await c.select("bees", { k: 20, noVectors: true });
		await c.context("bees", { budget: 900 });
		await c.context("bees", { budget: null });
		expect(bodies).toEqual([
			{ query: "bees", k: 20, no_vectors: true },
			{ query: "bees", k: 30, no_vectors: false, budget: 900 },
			{ query: "bees", k: 30, no_vectors: false },
		]);
	});
});

describe("each problem is one clear sentence", () => {
	it("no server.json: not running, and nothing is sent", async () => {
		rmSync(path.join(vault.root, ".vaultctx", "server.json"));
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("not-running");
		expect(problem.message).toMatch(/no server is running for this vault.*Start the server/);
		expect(requests).toEqual([]);
		expect(states).toEqual(["not-running"]);
	});

	it("a vault with no folder on disk: no file is read, nothing is sent", async () => {
		const problem = await problemOf(new VaultctxClient({ vaultPath: "", timeoutMs: () => 100 }).status());
		expect(problem.message).toMatch(/no folder on disk/);
		expect(requests).toEqual([]);
	});

	it("nothing answers on the port: not running", async () => {
		setRequestHandler(async () => {
			throw new Error("connect ECONNREFUSED 127.0.0.1:43210");
		});
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("not-running");
		expect(problem.message).toMatch(/nothing answers on 127\.0\.0\.1:43210/);
	});

	it("a token the server does not know: wrong token", async () => {
		serveFake({ ...vault, token: "another-token" });
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("wrong-token");
		expect(problem.message).toMatch(/refused this plugin's token/);
	});

	it("a token refused later (the token file changed): wrong token after one fresh try", async () => {
		serveFake(vault);
		const c = client();
		await c.status();
		serveFake({ ...vault, token: "rotated" });
		const before = requests.length;
		const problem = await problemOf(c.status());
		expect(problem.kind).toBe("wrong-token");
		// the cached connection failed, so server.json and the token were read again once, and
		// the server no longer proves it holds this install's token: nothing more is sent
		expect(requests.slice(before).map((r) => new URL(r.url).pathname)).toEqual(["/status", "/health"]);
		expect(requests[requests.length - 1].headers).toBeUndefined();
	});

	it("a server of another vault", async () => {
		serveFake({ ...vault, root: "/somewhere/else" });
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("other-vault");
		expect(problem.message).toContain("serves another vault (/somewhere/else)");
		expect(problem.message).toContain(vault.root);
	});

	it.each([
		["an old version", "0.0.9", /version 0\.0\.9/],
		["no version", "", /version unknown/],
	])("a server of %s", async (_, version, detail) => {
		serveFake(vault, {}, version);
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("old-server");
		expect(problem.message).toMatch(detail);
		expect(problem.message).toMatch(/too old for this plugin.*Upgrade vaultctx/);
	});

	it("a server whose /health never names its vault, though it takes the token: old", async () => {
		serveFake(vault, { "GET /health": () => response(200, { ok: true }) });
		const problem = await problemOf(client().status());
		expect(problem.kind).toBe("old-server");
	});

	it("a server without /related: old", async () => {
		serveFake(vault);
		const problem = await problemOf(client().related("a.md"));
		expect(problem.kind).toBe("old-server");
		expect(problem.message).toMatch(/it has no POST \/related/);
	});

	it("a note the index does not have: not found, the server's words", async () => {
		serveFake(vault, {
			"POST /related": () => response(404, { error: "NoteNotFound", message: "no note named 'x.md' in /v" }),
		});
		const problem = await problemOf(client().related("x.md"));
		expect(problem.kind).toBe("not-found");
		expect(problem.message).toBe("vaultctx: no note named 'x.md' in /v");
		expect(states).toEqual([]); // the link is fine
	});

	it("no answer in time: timeout, and a late answer is ignored", async () => {
		let release!: () => void;
		serveFake(vault, {
			"POST /select": () =>
				new Promise((resolve) => {
					release = () => resolve(response(200, selection("q", [])));
				}),
		});
		const started = Date.now();
		const problem = await problemOf(client(150).select("slow"));
		expect(Date.now() - started).toBeLessThan(1000);
		expect(problem.kind).toBe("timeout");
		expect(problem.message).toBe(
			"vaultctx: the server did not answer POST /select within 0.15 s. " +
				"It may be busy (indexing, loading the model); it is tried again on the next request.",
		);
		release();
	});

	it("an error the server reports: its type and message", async () => {
		serveFake(vault, {
			"POST /select": () => response(422, { error: "ValidationError", message: "k: must be ≥ 1" }),
		});
		const problem = await problemOf(client().select("q", { k: 0 }));
		expect(problem.kind).toBe("failed");
		expect(problem.status).toBe(422);
		expect(problem.message).toBe("vaultctx: POST /select failed: ValidationError: k: must be ≥ 1");
	});

	it("an answer that is not JSON", async () => {
		serveFake(vault, { "POST /select": () => response(200, "<html>") });
		const problem = await problemOf(client().select("q"));
		expect(problem.message).toMatch(/the answer is not JSON/);
	});
});

/** A foreign program on 127.0.0.1 that records every request it gets, answering each with
 * `answer` (the JSON of a vaultctx server, as it pretends to be). */
async function foreignListener(answer: (url: URL) => unknown): Promise<{ port: number; heard: string[]; close(): void }> {
	const heard: string[] = [];
	const server = http.createServer((req, res) => {
		let body = "";
		req.on("data", (chunk) => (body += chunk));
		req.on("end", () => {
			heard.push(`${req.method} ${req.url}\n${JSON.stringify(req.headers)}\n${body}`);
			res.writeHead(200, { "Content-Type": "application/json" });
			res.end(JSON.stringify(answer(new URL(req.url ?? "/", "http://127.0.0.1"))));
		});
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	return { port: (server.address() as AddressInfo).port, heard, close: () => server.close() };
}

describe("a foreign listener that server.json names", () => {
	const QUESTION = "what did I write about the divorce lawyer";

	it.each([
		["claims to be this vault's server", () => ({ ok: true, vault: vault.root, pid: 4242, version: "0.1.0" })],
		[
			"answers the challenge with a proof signed by a guessed token",
			(url: URL) => ({ ok: true, proof: proofs("guess", url.searchParams.get("challenge")!, listener.port, vault.root) }),
		],
	])("that %s gets neither a file, nor the token, nor the question", async (_, answer) => {
		listener = await foreignListener(answer);
		try {
			setRequestHandler(null); // real HTTP, through Node
			const credentials = path.join(vault.root, "credentials");
			writeFileSync(credentials, "aws_secret_access_key=wJalrXUtnFEMI\n", { mode: 0o600 });
			writeFileSync(
				path.join(vault.root, ".vaultctx", "server.json"),
				JSON.stringify({ port: listener.port, pid: 4242, vault: vault.root, token_path: credentials }),
			);
			const problem = await problemOf(client().context(QUESTION));
			expect(["old-server", "wrong-token"]).toContain(problem.kind);
			expect(listener.heard).toHaveLength(1);
			expect(listener.heard[0]).toMatch(/^GET \/health\?challenge=[0-9a-f]{32}\n/);
			for (const secret of ["wJalrXUtnFEMI", vault.token, "divorce", "authorization", vault.root]) {
				expect(listener.heard.join("\n")).not.toContain(secret);
			}
		} finally {
			listener.close();
		}
	});
});
let listener: Awaited<ReturnType<typeof foreignListener>>;

describe("a server that moved", () => {
	it("is found again through server.json after its old port stops answering", async () => {
		serveFake(vault, { "POST /select": () => response(200, selection("q", [])) });
		const c = client();
		await c.select("first");
		vault.announce(45678); // restarted on another port; the old one refuses
		setRequestHandler(async (req) => {
			const url = new URL(req.url);
			if (url.port === "43210") throw new Error("connect ECONNREFUSED");
			const challenge = url.searchParams.get("challenge");
			if (challenge !== null) return response(200, { ok: true, proof: proofs(vault.token, challenge, 45678, vault.root) });
			const health = { ok: true, vault: vault.root, pid: 4343, version: "0.1.0" };
			return response(200, url.pathname === "/health" ? health : selection("moved", []));
		});
		const moved = await c.select("second");
		expect(moved.query).toBe("moved");
		expect(requests.slice(-4).map((r) => r.url.replace(/challenge=\w+/, "challenge=…"))).toEqual([
			"http://127.0.0.1:43210/select",
			"http://127.0.0.1:45678/health?challenge=…",
			"http://127.0.0.1:45678/health",
			"http://127.0.0.1:45678/select",
		]);
	});
});

describe("withTimeout", () => {
	it("passes a value or an error through when in time", async () => {
		await expect(withTimeout(Promise.resolve(1), 50, () => new Error("late"))).resolves.toBe(1);
		await expect(withTimeout(Promise.reject(new Error("no")), 50, () => new Error("late"))).rejects.toThrow("no");
		await expect(withTimeout(new Promise(() => {}), 10, () => new Error("late"))).rejects.toThrow("late");
	});
});
