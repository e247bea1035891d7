/**
 * In-memory Redlock masters for the model test (redlock-model.test.ts): each keeps a holder key
 * with an expiry, a counter and an epoch, as the Lua scripts of src/stores/redlock/scripts.ts do,
 * and fails calls as planned. `restart(i, keepData)` is a restart with persistence (everything
 * kept) or without (everything lost); either way the master takes a new replication ID, as a
 * restarted or promoted Redis master does, so its next grant jumps the counter by FENCE_JUMP and
 * floors the token at its clock (fence-next.lua fence_epoch) unless the world was
 * made with `epochFloor: false` (the scripts before the epoch key). A master's clock is the
 * model's, in microseconds (ms × 1000), plus its skew.
 */
import type { TimerClock } from '../../../src/runtime/clock.ts';
import { redlockBackend, type MasterAcquire, type MasterPort } from '../../../src/stores/redlock/quorum.ts';
import type { LockBackend } from '../../../src/stores/store.ts';

/**
 * Fault: what happens to one call. `down`: refused, nothing applied; `dropRequest`: lost on the
 * way, nothing applied, no answer; `dropReply`: applied, the answer lost.
 */
export type Fault = 'ok' | 'down' | 'dropRequest' | 'dropReply';

interface MasterState {
  holder: { owner: string; expiresAt: number } | undefined;
  counter: bigint | undefined;
  /** process: this master's current replication ID (new at every restart); epoch: the one that issued the last token. */
  process: number;
  epoch: number | undefined;
  /** skewUs: how far this master's clock is ahead (negative: behind) of the model's. */
  skewUs: bigint;
}

/** FENCE_JUMP: fence-next.lua's jump of an existing counter when the epoch changed. */
const FENCE_JUMP = 1000n;

/** WorldOptions: epochFloor false models the acquire script without fence_epoch. */
export interface WorldOptions {
  readonly epochFloor?: boolean;
}

/** ModelWorld: n masters on one model clock. */
export class ModelWorld {
  #now = 0;
  readonly #masters: MasterState[];
  #acquireFaults: readonly Fault[] = [];
  #raiseFaults: readonly Fault[] = [];
  readonly clock: TimerClock = {
    now: () => new Date(this.#now),
    monotonicMs: () => this.#now,
    // Every model call answers at once: a timeout never fires.
    setTimeout: () => {
      const t = { cancel: () => undefined, unref: () => t };
      return t;
    },
  };

  readonly #epochFloor: boolean;

  constructor(n: number, o: WorldOptions = {}) {
    this.#epochFloor = o.epochFloor ?? true;
    this.#masters = Array.from({ length: n }, () => ({
      holder: undefined,
      counter: undefined,
      process: 0,
      epoch: undefined,
      skewUs: 0n,
    }));
  }

  tick(): void {
    this.#now += 1;
  }

  advance(ms: number): void {
    this.#now += ms;
  }

  /** plan sets the faults of the next acquire and raise calls, per master (missing: ok). */
  plan(acquire: readonly Fault[], raise: readonly Fault[]): void {
    this.#acquireFaults = acquire;
    this.#raiseFaults = raise;
  }

  restart(i: number, keepData: boolean): void {
    const m = this.#masters[i];
    if (m === undefined) return;
    m.process++;
    if (!keepData) {
      m.holder = undefined;
      m.counter = undefined;
      m.epoch = undefined;
    }
  }

  /** skew sets master i's clock `us` microseconds ahead of the model's (negative: behind). */
  skew(i: number, us: bigint): void {
    const m = this.#masters[i];
    if (m !== undefined) m.skewUs = us;
  }

  /** holders: each master's live holder (undefined when free). */
  holders(): (string | undefined)[] {
    return this.#masters.map((m) => this.#live(m)?.owner);
  }

  backend(): LockBackend {
    return redlockBackend(
      this.#masters.map((m, i) => this.#port(m, i)),
      { clock: this.clock },
    );
  }

  #live(m: MasterState): MasterState['holder'] {
    return m.holder !== undefined && m.holder.expiresAt > this.#now ? m.holder : undefined;
  }

  #port(m: MasterState, i: number): MasterPort {
    const call = async <T>(f: Fault | undefined, apply: () => T): Promise<T> => {
      await Promise.resolve();
      if (f === 'down') throw new Error(`master ${i} down`);
      if (f === 'dropRequest') throw new Error(`master ${i}: no answer`);
      const v = apply();
      if (f === 'dropReply') throw new Error(`master ${i}: no answer`);
      return v;
    };
    return {
      name: `m${i}`,
      acquire: (owner, ttlMs, floor) =>
        call(this.#acquireFaults[i], (): MasterAcquire => {
          const h = this.#live(m);
          if (h !== undefined) return { ok: false, heldForMs: h.expiresAt - this.#now };
          // fence_epoch: another replication ID than the last issuer's, or no counter: the counter
          // jumps by FENCE_JUMP (when there is one) and the floor is the clock.
          const existed = m.counter !== undefined;
          const epochChanged = this.#epochFloor && (m.epoch !== m.process || !existed);
          if (epochChanged && m.counter !== undefined) m.counter += FENCE_JUMP;
          const clockUs = BigInt(this.#now) * 1000n + m.skewUs;
          const f = epochChanged && clockUs > floor ? clockUs : floor;
          // fence_next: INCR (a missing counter counts as 0), re-floored above the floor.
          const next = (m.counter ?? 0n) + 1n;
          m.counter = next > f ? next : f + 1n;
          m.epoch = m.process;
          m.holder = { owner, expiresAt: this.#now + ttlMs };
          return { ok: true, counter: m.counter, existed, epochChanged };
        }),
      raise: (owner, token) =>
        call(this.#raiseFaults[i], () => {
          if (m.counter === undefined || token > m.counter) m.counter = token;
          return this.#live(m)?.owner === owner;
        }),
      renew: (owner, ttlMs) =>
        call('ok', () => {
          const h = this.#live(m);
          if (h?.owner !== owner) return false;
          h.expiresAt = this.#now + ttlMs;
          return true;
        }),
      release: (owner) =>
        call('ok', () => {
          if (this.#live(m)?.owner === owner) m.holder = undefined;
        }),
      subscribe: () => Promise.resolve(() => undefined),
    };
  }
}
