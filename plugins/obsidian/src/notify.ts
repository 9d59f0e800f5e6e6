// One clear notice per problem: the panel asks the server on every note change, and a server
// that is down must not bury the user in notices. A problem is shown when it is new (another
// kind than the last one shown, or after things worked again), or when the user asked.

import { Notice } from "obsidian";

import { ServerProblem } from "./problems";

export const NOTICE_MS = 8000;

export class Notifier {
	private lastShown: string | null = null;

	/** Show `problem` unless the same kind is already what the user was last told;
	 * `explicit` (a command the user ran) always shows it. Returns whether it showed. */
	report(problem: ServerProblem, explicit = false): boolean {
		if (!explicit && this.lastShown === problem.kind) return false;
		this.lastShown = problem.kind;
		new Notice(problem.message, NOTICE_MS);
		return true;
	}

	/** Things work again: the next problem is news. */
	clear(): void {
		this.lastShown = null;
	}

	info(message: string, ms = 4000): void {
		new Notice(message, ms);
	}
}
