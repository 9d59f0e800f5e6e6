// The status-bar item: connected / indexing / not running (or the problem), and a click
// that checks the connection. It starts as a plain "vaultctx": nothing is asked at start-up.

export type StatusState = "unknown" | "starting" | "connected" | "indexing" | "not-running" | "problem";

const TEXT: Record<StatusState, string> = {
	unknown: "vaultctx",
	starting: "vaultctx: starting…",
	connected: "vaultctx: connected",
	indexing: "vaultctx: indexing…",
	"not-running": "vaultctx: not running",
	problem: "vaultctx: problem",
};

export class StatusBar {
	state: StatusState = "unknown";

	constructor(
		private readonly el: HTMLElement,
		onClick: () => void,
	) {
		el.classList.add("vaultctx-status", "mod-clickable");
		el.addEventListener("click", onClick);
		this.set("unknown", "vaultctx: click to check the connection to this vault's server");
	}

	get text(): string {
		return this.el.textContent ?? "";
	}

	set(state: StatusState, detail?: string): void {
		this.state = state;
		this.el.textContent = TEXT[state];
		this.el.dataset.state = state;
		this.el.setAttribute("aria-label", detail ?? TEXT[state]);
		this.el.title = detail ?? TEXT[state];
	}
}
