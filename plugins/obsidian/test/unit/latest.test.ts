import { describe, expect, it } from "vitest";

import { Clock, LatestOnly } from "../../src/latest";
import { deferred } from "../helpers";

/** A clock the test moves by hand. */
class ManualClock implements Clock {
	time = 1000;
	private timers = new Map<number, { at: number; fn: () => void }>();
	private next = 1;
	now(): number {
		return this.time;
	}
	setTimeout(fn: () => void, ms: number): unknown {
		const id = this.next++;
		this.timers.set(id, { at: this.time + ms, fn });
		return id;
	}
	clearTimeout(handle: unknown): void {
		this.timers.delete(handle as number);
	}
	advance(ms: number): void {
		this.time += ms;
		for (const [id, timer] of [...this.timers].sort((a, b) => a[1].at - b[1].at)) {
			if (timer.at <= this.time) {
				this.timers.delete(id);
				timer.fn();
			}
		}
	}
}

function recorder(clock: ManualClock) {
	const started: string[] = [];
	const answers = new Map<string, ReturnType<typeof deferred<string>>>();
	const latest = new LatestOnly<string, string>(
		(arg) => {
			started.push(arg);
			const d = deferred<string>();
			answers.set(arg, d);
			return d.promise;
		},
		250,
		clock,
	);
	return { latest, started, answers };
}

describe("LatestOnly", () => {
	it("runs the first call at once", async () => {
		const clock = new ManualClock();
		const { latest, started, answers } = recorder(clock);
		const outcome = latest.schedule("a");
		expect(started).toEqual(["a"]);
		answers.get("a")!.resolve("A");
		clock.time += 12;
		await expect(outcome).resolves.toMatchObject({ status: "done", value: "A" });
	});

	it("coalesces calls faster than the delay into one request with the last argument", async () => {
		const clock = new ManualClock();
		const { latest, started, answers } = recorder(clock);
		const first = latest.schedule("a");
		clock.advance(50);
		const second = latest.schedule("b");
		clock.advance(100);
		const third = latest.schedule("c");
		clock.advance(249);
		expect(started).toEqual(["a"]); // b never asked; c not yet
		clock.advance(1);
		expect(started).toEqual(["a", "c"]);
		answers.get("a")!.resolve("A"); // superseded: dropped
		answers.get("c")!.resolve("C");
		for (const outcome of await Promise.all([first, second, third])) {
			expect(outcome).toMatchObject({ status: "done", value: "C" });
		}
		expect(latest.dropped).toBe(1);
	});

	it("drops an answer that arrives after a newer request's", async () => {
		const clock = new ManualClock();
		const { latest, answers } = recorder(clock);
		const slow = latest.schedule("slow");
		clock.advance(300);
		const fast = latest.schedule("fast");
		answers.get("fast")!.resolve("FAST");
		await expect(fast).resolves.toMatchObject({ value: "FAST" });
		await expect(slow).resolves.toMatchObject({ value: "FAST" });
		answers.get("slow")!.resolve("SLOW");
		await Promise.resolve();
		expect(latest.dropped).toBe(1);
		expect(latest.pending).toBe(false);
	});

	it("reports a failure of the latest request", async () => {
		const clock = new ManualClock();
		const latest = new LatestOnly<string, string>(async () => {
			throw new Error("down");
		}, 250, clock);
		const outcome = await latest.schedule("x");
		expect(outcome.status).toBe("failed");
		expect(outcome.status === "failed" && (outcome.error as Error).message).toBe("down");
	});

	it("cancels what is pending and in flight", async () => {
		const clock = new ManualClock();
		const { latest, started, answers } = recorder(clock);
		const inFlight = latest.schedule("a");
		clock.advance(10);
		const waiting = latest.schedule("b");
		latest.cancel();
		clock.advance(1000);
		expect(started).toEqual(["a"]);
		await expect(inFlight).resolves.toEqual({ status: "cancelled" });
		await expect(waiting).resolves.toEqual({ status: "cancelled" });
		answers.get("a")!.resolve("A");
		await Promise.resolve();
		expect(latest.dropped).toBe(1);
	});
});
