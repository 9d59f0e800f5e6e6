// The plugin's settings and their tab.

import { App, Plugin, PluginSettingTab, Setting } from "obsidian";

export interface VaultctxSettings {
	/** The vaultctx executable that "Start the server" runs (a name on PATH or a full path). */
	executable: string;
	/** More arguments for `vaultctx serve`, e.g. `--no-embed`. */
	serveArgs: string;
	/** Notes shown in the panel; results asked for in the search modal. */
	k: number;
	/** Token budget of "Copy context" (0: the vault's `budget_tokens`). */
	budget: number;
	/** Use embedding search (off: lexical and graph only, never loads the model). */
	useVectors: boolean;
	/** Time limit of one request to the server, in seconds. */
	timeoutSeconds: number;
}

export const DEFAULT_SETTINGS: VaultctxSettings = {
	executable: "vaultctx",
	serveArgs: "",
	k: 10,
	budget: 0,
	useVectors: true,
	timeoutSeconds: 10,
};

/** Stored settings over the defaults, each checked (a hand-edited data.json cannot break us). */
export function loadSettings(stored: unknown): VaultctxSettings {
	const data = (typeof stored === "object" && stored !== null ? stored : {}) as Partial<VaultctxSettings>;
	const settings = { ...DEFAULT_SETTINGS };
	if (typeof data.executable === "string" && data.executable.trim()) settings.executable = data.executable.trim();
	if (typeof data.serveArgs === "string") settings.serveArgs = data.serveArgs;
	settings.k = intIn(data.k, 1, 50, DEFAULT_SETTINGS.k);
	settings.budget = intIn(data.budget, 0, 1_000_000, DEFAULT_SETTINGS.budget);
	if (typeof data.useVectors === "boolean") settings.useVectors = data.useVectors;
	settings.timeoutSeconds = intIn(data.timeoutSeconds, 1, 300, DEFAULT_SETTINGS.timeoutSeconds);
	return settings;
}

function intIn(value: unknown, min: number, max: number, fallback: number): number {
	const n = typeof value === "string" ? Number(value) : value;
	return typeof n === "number" && Number.isInteger(n) && n >= min && n <= max ? n : fallback;
}

interface SettingsHost extends Plugin {
	settings: VaultctxSettings;
	saveSettings(): Promise<void>;
}

export class VaultctxSettingTab extends PluginSettingTab {
	constructor(
		app: App,
		private readonly host: SettingsHost,
	) {
		super(app, host);
	}

	display(): void {
		const { containerEl } = this;
		containerEl.replaceChildren();
		const settings = this.host.settings;
		const save = (change: Partial<VaultctxSettings>) => {
			this.host.settings = loadSettings({ ...this.host.settings, ...change });
			return this.host.saveSettings();
		};
		containerEl.createEl("p", {
			text:
				"vaultctx runs on this computer: the plugin talks only to the vault's own server on " +
				"127.0.0.1, with the token from its 0600 file. Nothing leaves the machine.",
		});
		new Setting(containerEl)
			.setName("vaultctx executable")
			.setDesc("What “Start the server” runs: a name on PATH, or the full path (e.g. ~/.local/bin/vaultctx).")
			.addText((text) =>
				text
					.setPlaceholder("vaultctx")
					.setValue(settings.executable)
					.onChange((value) => save({ executable: value })),
			);
		new Setting(containerEl)
			.setName("Server arguments")
			.setDesc("More arguments for `vaultctx serve`, e.g. --no-embed (text and links only).")
			.addText((text) => text.setValue(settings.serveArgs).onChange((value) => save({ serveArgs: value })));
		new Setting(containerEl)
			.setName("Related notes")
			.setDesc("How many notes the panel shows (1–50).")
			.addText((text) => text.setValue(String(settings.k)).onChange((value) => save({ k: Number(value) })));
		new Setting(containerEl)
			.setName("Context budget")
			.setDesc("Tokens “Copy context” may use; 0 uses the vault's budget_tokens.")
			.addText((text) =>
				text.setValue(String(settings.budget)).onChange((value) => save({ budget: Number(value) })),
			);
		new Setting(containerEl)
			.setName("Embedding search")
			.setDesc("Off: full-text and links only (the server never loads the model for the plugin's requests).")
			.addToggle((toggle) => toggle.setValue(settings.useVectors).onChange((value) => save({ useVectors: value })));
		new Setting(containerEl)
			.setName("Request time limit")
			.setDesc("Seconds to wait for the server before giving up (1–300).")
			.addText((text) =>
				text
					.setValue(String(settings.timeoutSeconds))
					.onChange((value) => save({ timeoutSeconds: Number(value) })),
			);
	}
}
