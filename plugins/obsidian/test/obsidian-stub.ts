// A small stand-in for the `obsidian` module (an Electron app's API that cannot run here),
// aliased for `obsidian` in vitest.config.ts. It is the tests' only mock. `requestUrl` is
// real HTTP through Node, as Obsidian's is real HTTP without CORS, and records every request
// so tests can check where the plugin sends them.

import * as http from "http";

// --- requests -------------------------------------------------------------------------------

export interface RequestUrlParam {
	url: string;
	method?: string;
	contentType?: string;
	body?: string | ArrayBuffer;
	headers?: Record<string, string>;
	throw?: boolean;
}

export interface RequestUrlResponse {
	status: number;
	headers: Record<string, string>;
	arrayBuffer: ArrayBuffer;
	json: any;
	text: string;
}

/** Every request the plugin made, in order. */
export const requests: RequestUrlParam[] = [];
type Handler = (request: RequestUrlParam) => Promise<RequestUrlResponse>;
let handler: Handler | null = null;

/** Answer requests with `fn` instead of the network (unit tests); null: real HTTP again. */
export function setRequestHandler(fn: Handler | null): void {
	handler = fn;
}

export function response(status: number, body: unknown): RequestUrlResponse {
	const text = typeof body === "string" ? body : JSON.stringify(body);
	return {
		status,
		headers: { "content-type": "application/json" },
		arrayBuffer: new TextEncoder().encode(text).buffer as ArrayBuffer,
		text,
		get json() {
			return JSON.parse(text);
		},
	};
}

const agent = new http.Agent({ keepAlive: true });

export function requestUrl(request: RequestUrlParam | string): Promise<RequestUrlResponse> {
	const param = typeof request === "string" ? { url: request } : request;
	requests.push(param);
	if (handler) return handler(param);
	return new Promise((resolve, reject) => {
		const headers: Record<string, string> = { ...(param.headers ?? {}) };
		if (param.contentType) headers["Content-Type"] = param.contentType;
		const req = http.request(param.url, { method: param.method ?? "GET", headers, agent }, (res) => {
			const chunks: Buffer[] = [];
			res.on("data", (chunk: Buffer) => chunks.push(chunk));
			res.on("end", () => {
				const answer = response(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8"));
				answer.headers = res.headers as Record<string, string>;
				if (param.throw !== false && answer.status >= 400) {
					reject(new Error(`Request failed, status ${answer.status}`));
				} else {
					resolve(answer);
				}
			});
			res.on("error", reject);
		});
		req.on("error", reject);
		if (param.body !== undefined) req.write(typeof param.body === "string" ? param.body : Buffer.from(param.body));
		req.end();
	});
}

// --- notices ---------------------------------------------------------------------------------

/** Every notice shown, in order. */
export const notices: string[] = [];

export class Notice {
	messageEl: HTMLElement | null = null;
	constructor(message: string | DocumentFragment, _duration?: number) {
		notices.push(typeof message === "string" ? message : (message.textContent ?? ""));
	}
	setMessage(message: string): this {
		notices.push(message);
		return this;
	}
	hide(): void {}
}

// --- events and components -------------------------------------------------------------------

export interface EventRef {
	name: string;
	fn: (...args: any[]) => unknown;
}

export class Events {
	private handlers = new Map<string, Set<EventRef>>();
	on(name: string, fn: (...args: any[]) => unknown): EventRef {
		const ref = { name, fn };
		if (!this.handlers.has(name)) this.handlers.set(name, new Set());
		this.handlers.get(name)!.add(ref);
		return ref;
	}
	offref(ref: EventRef): void {
		this.handlers.get(ref.name)?.delete(ref);
	}
	trigger(name: string, ...args: unknown[]): void {
		for (const ref of [...(this.handlers.get(name) ?? [])]) ref.fn(...args);
	}
	listeners(name: string): number {
		return this.handlers.get(name)?.size ?? 0;
	}
}

export class Component {
	private cleanups: Array<() => void> = [];
	registerEvent(ref: EventRef & { owner?: Events }): void {
		this.cleanups.push(() => ref.owner?.offref(ref));
	}
	registerInterval(id: number): number {
		this.cleanups.push(() => clearInterval(id));
		return id;
	}
	register(fn: () => void): void {
		this.cleanups.push(fn);
	}
	unload(): void {
		for (const fn of this.cleanups.splice(0)) fn();
	}
}

/** Events whose refs know their owner, so Component.registerEvent can remove them. */
class OwnedEvents extends Events {
	override on(name: string, fn: (...args: any[]) => unknown): EventRef {
		const ref = super.on(name, fn) as EventRef & { owner?: Events };
		ref.owner = this;
		return ref;
	}
}

// --- files and vault -------------------------------------------------------------------------

export class TAbstractFile {
	path = "";
	name = "";
}

export class TFile extends TAbstractFile {
	basename: string;
	extension: string;
	constructor(path: string) {
		super();
		this.path = path;
		this.name = path.split("/").pop() ?? path;
		const dot = this.name.lastIndexOf(".");
		this.basename = dot > 0 ? this.name.slice(0, dot) : this.name;
		this.extension = dot > 0 ? this.name.slice(dot + 1) : "";
	}
}

export class FileSystemAdapter {
	constructor(private readonly basePath: string) {}
	getBasePath(): string {
		return this.basePath;
	}
}

export class Vault extends OwnedEvents {
	constructor(readonly adapter: FileSystemAdapter) {
		super();
	}
}

// --- workspace -------------------------------------------------------------------------------

export class WorkspaceLeaf {
	view: any = null;
	constructor(readonly app: App) {}
	async setViewState(state: { type: string }): Promise<void> {
		const make = this.app.workspace.viewFactories.get(state.type);
		if (!make) throw new Error(`no view ${state.type}`);
		this.view = make(this);
		this.app.workspace.leaves.push(this);
		await this.view.onOpen();
	}
	detach(): void {
		this.view?.onClose();
		this.view?.unload();
		this.app.workspace.leaves = this.app.workspace.leaves.filter((leaf) => leaf !== this);
	}
}

export interface OpenedLink {
	linktext: string;
	sourcePath: string;
	newLeaf: unknown;
	state?: unknown;
}

export class Workspace extends OwnedEvents {
	activeFile: TFile | null = null;
	activeEditor: { editor?: { getSelection(): string } } | null = null;
	opened: OpenedLink[] = [];
	leaves: WorkspaceLeaf[] = [];
	viewFactories = new Map<string, (leaf: WorkspaceLeaf) => unknown>();
	constructor(readonly app: App) {
		super();
	}
	getActiveFile(): TFile | null {
		return this.activeFile;
	}
	/** The user opens `path` in the editor. */
	openFile(path: string | null): void {
		this.activeFile = path === null ? null : new TFile(path);
		this.trigger("file-open", this.activeFile);
	}
	async openLinkText(linktext: string, sourcePath: string, newLeaf?: unknown, state?: unknown): Promise<void> {
		this.opened.push({ linktext, sourcePath, newLeaf, state });
	}
	getLeavesOfType(type: string): WorkspaceLeaf[] {
		return this.leaves.filter((leaf) => leaf.view?.getViewType?.() === type);
	}
	getRightLeaf(_split: boolean): WorkspaceLeaf {
		return new WorkspaceLeaf(this.app);
	}
	async revealLeaf(_leaf: WorkspaceLeaf): Promise<void> {}
}

export class App {
	vault: Vault;
	workspace: Workspace;
	constructor(basePath: string) {
		this.vault = new Vault(new FileSystemAdapter(basePath));
		this.workspace = new Workspace(this);
	}
}

export const Keymap = {
	isModEvent(event?: MouseEvent | KeyboardEvent | null): boolean {
		return Boolean(event && (event.ctrlKey || event.metaKey));
	},
};

// --- views, modals, plugin -------------------------------------------------------------------

export class HoverPopover {}

export abstract class View extends Component {
	app: App;
	containerEl: HTMLElement;
	constructor(readonly leaf: WorkspaceLeaf) {
		super();
		this.app = leaf.app;
		this.containerEl = document.createElement("div");
	}
	abstract getViewType(): string;
}

export abstract class ItemView extends View {
	contentEl: HTMLElement;
	constructor(leaf: WorkspaceLeaf) {
		super(leaf);
		this.containerEl.appendChild(document.createElement("div")).className = "view-header";
		this.contentEl = this.containerEl.appendChild(document.createElement("div"));
		this.contentEl.className = "view-content";
	}
	async onOpen(): Promise<void> {}
	async onClose(): Promise<void> {}
}

export class Modal {
	/** Every modal opened, last one last (tests reach the search modal this way). */
	static opened: Modal[] = [];
	containerEl = document.createElement("div");
	titleEl = document.createElement("div");
	contentEl = document.createElement("div");
	isOpen = false;
	constructor(readonly app: App) {
		this.containerEl.append(this.titleEl, this.contentEl);
	}
	open(): void {
		Modal.opened.push(this);
		this.isOpen = true;
		document.body.appendChild(this.containerEl);
		this.onOpen();
	}
	close(): void {
		if (!this.isOpen) return;
		this.isOpen = false;
		this.containerEl.remove();
		this.onClose();
	}
	onOpen(): void {}
	onClose(): void {}
}

export interface Instruction {
	command: string;
	purpose: string;
}

export abstract class SuggestModal<T> extends Modal {
	limit = 100;
	emptyStateText = "No results found.";
	inputEl = document.createElement("input");
	resultContainerEl = document.createElement("div");
	placeholder = "";
	instructions: Instruction[] = [];
	/** What the list shows now (tests read it). */
	shown: T[] = [];
	private selected = 0;

	constructor(app: App) {
		super(app);
		this.containerEl.append(this.inputEl, this.resultContainerEl);
	}
	setPlaceholder(placeholder: string): void {
		this.placeholder = placeholder;
	}
	setInstructions(instructions: Instruction[]): void {
		this.instructions = instructions;
	}
	/** The user types `value`: like Obsidian, each input event asks for suggestions, and an
	 * answer is shown when it arrives. Resolves when this input's suggestions are shown. */
	async type(value: string): Promise<T[]> {
		this.inputEl.value = value;
		const items = await this.getSuggestions(value);
		if (this.inputEl.value === value) this.show(items);
		return items;
	}
	show(items: T[]): void {
		this.shown = items.slice(0, this.limit);
		this.selected = 0;
		this.resultContainerEl.replaceChildren();
		if (!this.shown.length) {
			this.resultContainerEl.appendChild(document.createElement("div")).textContent = this.emptyStateText;
		}
		for (const item of this.shown) {
			const el = this.resultContainerEl.appendChild(document.createElement("div"));
			el.className = "suggestion-item";
			this.renderSuggestion(item, el);
		}
	}
	/** Arrow keys. */
	move(by: number): void {
		if (this.shown.length) this.selected = (this.selected + by + this.shown.length) % this.shown.length;
	}
	/** Enter. */
	enter(): void {
		const item = this.shown[this.selected];
		if (item === undefined) return;
		this.close();
		this.onChooseSuggestion(item, new KeyboardEvent("keydown", { key: "Enter" }));
	}
	abstract getSuggestions(query: string): T[] | Promise<T[]>;
	abstract renderSuggestion(value: T, el: HTMLElement): void;
	abstract onChooseSuggestion(item: T, evt: MouseEvent | KeyboardEvent): void;
}

export class PluginSettingTab {
	containerEl = document.createElement("div");
	constructor(
		readonly app: App,
		readonly plugin: Plugin,
	) {}
	display(): void {}
}

export class Setting {
	constructor(readonly containerEl: HTMLElement) {}
}

export interface PluginManifest {
	id: string;
	version: string;
}

export interface Command {
	id: string;
	name: string;
	callback?: () => unknown;
	checkCallback?: (checking: boolean) => boolean | void;
}

export class Plugin extends Component {
	commands = new Map<string, Command>();
	statusBarItems: HTMLElement[] = [];
	hoverSources = new Map<string, unknown>();
	settingTabs: PluginSettingTab[] = [];
	data: unknown = null;
	constructor(
		readonly app: App,
		readonly manifest: PluginManifest,
	) {
		super();
	}
	async loadData(): Promise<unknown> {
		return this.data;
	}
	async saveData(data: unknown): Promise<void> {
		this.data = data;
	}
	addCommand(command: Command): Command {
		this.commands.set(command.id, command);
		return command;
	}
	addSettingTab(tab: PluginSettingTab): void {
		this.settingTabs.push(tab);
	}
	addStatusBarItem(): HTMLElement {
		const el = document.createElement("div");
		this.statusBarItems.push(el);
		return el;
	}
	addRibbonIcon(_icon: string, _title: string, _callback: (evt: MouseEvent) => unknown): HTMLElement {
		return document.createElement("div");
	}
	registerView(type: string, factory: (leaf: WorkspaceLeaf) => unknown): void {
		this.app.workspace.viewFactories.set(type, factory);
	}
	registerHoverLinkSource(id: string, info: unknown): void {
		this.hoverSources.set(id, info);
	}
	/** Run a command as the palette would. */
	runCommand(id: string): unknown {
		const command = this.commands.get(id);
		if (!command) throw new Error(`no command ${id}`);
		if (command.callback) return command.callback();
		return command.checkCallback?.(false);
	}
	onload(): unknown {
		return undefined;
	}
	onunload(): void {}
	/** Obsidian disables a plugin: its components go, then its onunload. */
	override unload(): void {
		super.unload();
		this.onunload();
	}
}

// --- the browser around Obsidian ---------------------------------------------------------------

/** What the plugin wrote to the clipboard (Electron has navigator.clipboard; jsdom has not). */
export const clipboard: string[] = [];
if (typeof navigator !== "undefined" && !navigator.clipboard) {
	Object.defineProperty(navigator, "clipboard", {
		value: {
			writeText: async (text: string) => {
				clipboard.push(text);
			},
		},
	});
}
