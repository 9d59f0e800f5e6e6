// Debounced requests whose stale answers are dropped.
//
// `requestUrl` cannot be aborted, so "cancelling" a request means ignoring its answer: each
// call to `schedule` supersedes every earlier one, and only the answer of the latest request
// is delivered. The first call after a quiet spell runs at once (the panel follows a note
// change without waiting); calls that come faster than `delayMs` apart are coalesced into
// one request with the last argument, `delayMs` after the last of them.

export type Outcome<R> =
	| { status: "done"; value: R; ms: number }
	| { status: "failed"; error: unknown; ms: number }
	| { status: "cancelled" };

export interface Clock {
	now(): number;
	setTimeout(fn: () => void, ms: number): unknown;
	clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
	now: () => performance.now(),
	setTimeout: (fn, ms) => setTimeout(fn, ms),
	clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export class LatestOnly<A, R> {
	private seq = 0;
	private timer: unknown = null;
	private lastStart = -Infinity;
	private waiters: Array<(outcome: Outcome<R>) => void> = [];
	/** How many answers arrived too late and were dropped (tests and benchmarks read it). */
	dropped = 0;

	constructor(
		private readonly run: (arg: A) => Promise<R>,
		private readonly delayMs: number,
		private readonly clock: Clock = realClock,
	) {}

	/** Ask for `arg`; resolves with the outcome of the latest request: this one's, or that of
	 * a later call that superseded it (every waiter then gets the newest answer). */
	schedule(arg: A): Promise<Outcome<R>> {
		const seq = ++this.seq;
		const promise = new Promise<Outcome<R>>((resolve) => this.waiters.push(resolve));
		if (this.timer !== null) this.clock.clearTimeout(this.timer);
		this.timer = null;
		const quiet = this.clock.now() - this.lastStart >= this.delayMs;
		if (quiet) {
			this.start(arg, seq);
		} else {
			this.timer = this.clock.setTimeout(() => {
				this.timer = null;
				this.start(arg, seq);
			}, this.delayMs);
		}
		return promise;
	}

	/** Drop whatever is pending or in flight; its waiters get `cancelled`. */
	cancel(): void {
		this.seq++;
		if (this.timer !== null) this.clock.clearTimeout(this.timer);
		this.timer = null;
		this.settle({ status: "cancelled" });
	}

	get pending(): boolean {
		return this.waiters.length > 0;
	}

	private start(arg: A, seq: number): void {
		const started = this.clock.now();
		this.lastStart = started;
		let request: Promise<R>;
		try {
			request = this.run(arg);
		} catch (error) {
			request = Promise.reject(error);
		}
		request.then(
			(value) => this.finish(seq, { status: "done", value, ms: this.clock.now() - started }),
			(error) => this.finish(seq, { status: "failed", error, ms: this.clock.now() - started }),
		);
	}

	private finish(seq: number, outcome: Outcome<R>): void {
		if (seq !== this.seq) {
			this.dropped++;
			return;
		}
		this.settle(outcome);
	}

	private settle(outcome: Outcome<R>): void {
		const waiters = this.waiters;
		this.waiters = [];
		for (const resolve of waiters) resolve(outcome);
	}
}
