// @vitest-environment node
// The plugin shipped inside the Python package (src/vaultctx/obsidian/plugin/) must be what
// this source builds to, so the two never drift: build again and compare byte for byte.

import { readFileSync, statSync } from "fs";
import * as path from "path";
import { pathToFileURL } from "url";

import { describe, expect, it } from "vitest";

import { tempDir } from "./helpers";

const HERE = path.resolve(__dirname, "..");

interface BuildConfig {
	build(outDir: string): Promise<void>;
	SHIPPED: string;
	STATIC_FILES: string[];
}

async function config(): Promise<BuildConfig> {
	return import(pathToFileURL(path.join(HERE, "esbuild.config.mjs")).href) as Promise<BuildConfig>;
}

describe("the built plugin", () => {
	it("shipped in the Python package equals a fresh build (else: npm run build, and commit)", async () => {
		const { build, SHIPPED, STATIC_FILES } = await config();
		const out = tempDir("vaultctx-build-");
		await build(out);
		for (const name of ["main.js", ...STATIC_FILES]) {
			const fresh = readFileSync(path.join(out, name), "utf8");
			const shipped = readFileSync(path.join(SHIPPED, name), "utf8");
			expect(shipped, `${path.relative(path.join(HERE, "../.."), SHIPPED)}/${name} is stale`).toBe(fresh);
		}
	});

	it("is small: main.js at most 150 KB", async () => {
		const { SHIPPED } = await config();
		expect(statSync(path.join(SHIPPED, "main.js")).size).toBeLessThanOrEqual(150 * 1024);
	});

	it("is a desktop-only plugin with id vaultctx, at the package's version", () => {
		const manifest = JSON.parse(readFileSync(path.join(HERE, "manifest.json"), "utf8"));
		const pkg = JSON.parse(readFileSync(path.join(HERE, "package.json"), "utf8"));
		expect(manifest).toMatchObject({ id: "vaultctx", isDesktopOnly: true, version: pkg.version });
	});

	it("loads in Obsidian's module system: CommonJS, with obsidian and Node's modules left outside", async () => {
		const { SHIPPED } = await config();
		const code = readFileSync(path.join(SHIPPED, "main.js"), "utf8");
		expect(code).toMatch(/module\.exports = __toCommonJS\(main_exports\)/);
		const required = [...code.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]).sort();
		expect([...new Set(required)]).toEqual(["child_process", "crypto", "fs", "obsidian", "os", "path"]);
	});
});
