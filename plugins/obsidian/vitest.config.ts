import { fileURLToPath } from "node:url";

import { defineConfig } from "vitest/config";

export default defineConfig({
	resolve: {
		// Obsidian's API exists only inside the app: the tests' one stand-in.
		alias: { obsidian: fileURLToPath(new URL("./test/obsidian-stub.ts", import.meta.url)) },
	},
	test: {
		environment: "jsdom",
		include: ["test/**/*.test.ts"],
		testTimeout: 30_000,
		hookTimeout: 120_000,
		// Two cores, shared: integration files each start a real server.
		pool: "forks",
		poolOptions: { forks: { maxForks: 2, minForks: 1 } },
		reporters: ["default"],
	},
});
