/**
 * The pure parts of the race's server: which worker lines and Lease polls become timeline events.
 * No I/O and no clock: the caller passes `now`. Workers write every 200 ms, so only what changes
 * the story is kept — the first accepted write of each term, every stale write (refused or not),
 * the ledger's value when it changes, the agent's answers when they change.
 */
import type { WorkerEvent } from '../demo/events.ts';
import type { RaceEvent } from './events.ts';

/** WriteNarrator turns one round's worker events into race events. Make a new one per round. */
export class WriteNarrator {
  /** #maxAccepted: the largest token with an accepted write this round (a smaller one after it is stale). */
  #maxAccepted: bigint | undefined;
  readonly #told = new Set<string>();
  #ledger: string | null | undefined;

  /** ledger seeds the known value of the key, so that the first write that keeps it is not reported as a change. */
  constructor(ledger?: string | null) {
    this.#ledger = ledger;
  }

  /** next returns the race events for one worker event (often none). */
  next(e: WorkerEvent, now: number): RaceEvent[] {
    switch (e.type) {
      case 'state':
        return [
          {
            type: 'agent',
            at: now,
            pod: e.pod,
            state: e.state,
            held: e.held,
            ...(e.token !== undefined ? { token: e.token } : {}),
          },
        ];
      case 'checked':
        return [];
      case 'error':
        return [{ type: 'failed', at: now, message: `${e.pod}'s write failed: ${e.message}` }];
      case 'write':
        return this.#write(e, now);
    }
  }

  #write(e: Extract<WorkerEvent, { type: 'write' }>, now: number): RaceEvent[] {
    if (!e.accepted) return [{ type: 'refused', at: now, pod: e.pod, token: e.token, highWater: e.highWater ?? '?' }];
    const out: RaceEvent[] = [];
    const token = BigInt(e.token);
    if (this.#maxAccepted !== undefined && token < this.#maxAccepted) {
      out.push({ type: 'overwrote', at: now, pod: e.pod, token: e.token, previous: e.previous ?? null });
    } else {
      this.#maxAccepted = token;
      const term = `${e.pod}/${e.token}`;
      if (!this.#told.has(term)) {
        this.#told.add(term);
        out.push({ type: 'wrote', at: now, pod: e.pod, token: e.token });
      }
    }
    if (e.value !== this.#ledger) {
      this.#ledger = e.value;
      out.push({ type: 'ledger', at: now, value: e.value });
    }
    return out;
  }
}

/** LeaseSeen is what the Lease watcher remembers between polls. */
export interface LeaseSeen {
  readonly pod: string | undefined;
  readonly token: string | undefined;
  readonly renewTime: number | undefined;
  readonly leaseSeconds: number | undefined;
  /** expiredTold: the expiry of this term was reported already. */
  readonly expiredTold: boolean;
}

/** LeasePoll is one reading of the lock's Lease: holder, token, last renewal (ms), duration (s). */
export interface LeasePoll {
  readonly pod: string | undefined;
  readonly token: string | undefined;
  readonly renewTime: number | undefined;
  readonly leaseSeconds: number | undefined;
}

/** NOTHING_SEEN: the watcher's state before the first poll. */
export const NOTHING_SEEN: LeaseSeen = {
  pod: undefined,
  token: undefined,
  renewTime: undefined,
  leaseSeconds: undefined,
  expiredTold: false,
};

/**
 * leaseEvents compares one poll of the Lease with the last: a new token is a grant, a new
 * renewTime a renewal (with the time the lease runs out), and a renewTime older than the lease
 * duration at `now` an expiry, reported once per term. The expiry is judged by this machine's
 * clock from the agent's renewTime, which is the same machine's clock here. The controller judges
 * by its own observation of the renewal, a few milliseconds later, and grants at once: the next
 * poll may see the new grant before any poll saw the old term expired. A new term whose
 * predecessor ran out unreported reports that expiry first, dated when it happened.
 */
export function leaseEvents(seen: LeaseSeen, poll: LeasePoll, now: number): { seen: LeaseSeen; events: RaceEvent[] } {
  const { pod, token, renewTime, leaseSeconds } = poll;
  if (pod === undefined || token === undefined) return { seen, events: [] };
  const events: RaceEvent[] = [];
  const newTerm = token !== seen.token;
  if (newTerm && seen.pod !== undefined && seen.token !== undefined && !seen.expiredTold) {
    const ranOut =
      seen.renewTime !== undefined && seen.leaseSeconds !== undefined
        ? seen.renewTime + seen.leaseSeconds * 1000
        : undefined;
    if (ranOut !== undefined && ranOut <= now)
      events.push({ type: 'expired', at: ranOut, pod: seen.pod, token: seen.token });
  }
  if (newTerm)
    events.push({
      type: 'grant',
      at: now,
      pod,
      token,
      ...(seen.pod !== undefined && seen.pod !== pod ? { previous: seen.pod } : {}),
    });
  let expiredTold = newTerm ? false : seen.expiredTold;
  if (renewTime !== undefined && leaseSeconds !== undefined) {
    const expiresAt = renewTime + leaseSeconds * 1000;
    if (newTerm || renewTime !== seen.renewTime) {
      events.push({ type: 'lease', at: now, pod, token, expiresAt });
      expiredTold = false;
    }
    if (!expiredTold && now > expiresAt) {
      events.push({ type: 'expired', at: now, pod, token });
      expiredTold = true;
    }
  }
  return { seen: { pod, token, renewTime, leaseSeconds, expiredTold }, events };
}
