/**
 * Redlock over N independent masters, with fencing tokens that stay monotonic across majorities.
 * The algorithm is written against {@link MasterPort}, so that the same code runs on real Redis
 * masters (redlock/masters.ts) and on the in-memory masters of the model test
 * (test/unit/stores/redlock-model.test.ts).
 *
 * Acquire (Kleppmann's and antirez's Redlock, plus a token):
 * 1. note the time BEFORE sending; on every master in parallel, with a per-master timeout, SET
 *    the holder key NX PX and advance the master's counter (INCR, re-floored above the floor),
 *    in one script that answers the counter's new value;
 * 2. held if a majority granted and the validity (start + TTL − drift) has not passed;
 * 3. token = the largest value the majority answered (or floor + 1);
 * 4. if a majority answered exactly the token, the counter already stands at the token on a
 *    majority: the grant counts (one round trip, the usual case: a grant that took every master
 *    advances every counter alike). Otherwise the token is written with a raise-only script (SET
 *    the counter to the token only if greater) to the masters that granted, and the grant counts
 *    only if a majority acknowledged the raise while the owner still held its key there, within
 *    the validity. Any failure releases on every master.
 *
 * Why tokens only grow: a counted grant G left counter ≥ t_G on a majority M_G (counters only
 * grow; the values were answered, or raised, while G held the key there). A grant H that starts
 * after G counted acquires a majority M_H, which intersects M_G (two majorities of N share a
 * master), and advances that master's counter past its value after G: t_H ≥ t_G + 1. What breaks it: a master of M_G that loses the acknowledged
 * counter (restart without persistence, failover to a replica that had not received it) no longer
 * vouches for t_G, and if the intersection with M_H is only such masters, t_H can be ≤ t_G.
 * docs/stores.md states it; the model test finds it.
 */
import { MAX_TOKEN } from '../../protocol/token.ts';
import type { Clock, TimerClock } from '../../runtime/clock.ts';
import { validUntil } from '../redis/timing.ts';
import type { Attempt, LockBackend, RenewAnswer } from '../store.ts';

/** MasterAcquire: what one master answered to the acquire script (taken: the counter's new value, and whether it existed before). */
export type MasterAcquire =
  | { readonly ok: true; readonly counter: bigint; readonly existed: boolean; readonly epochChanged: boolean }
  | { readonly ok: false; readonly heldForMs: number };

/** MasterPort is one master, for one lock. Every method may throw (down, timeout). */
export interface MasterPort {
  readonly name: string;
  /** acquire: SET NX PX of the holder key and, when it took, the counter advanced (INCR, above `floor`): its new value. */
  acquire(owner: string, ttlMs: number, floor: bigint): Promise<MasterAcquire>;
  /** raise: counter := token if token is greater (always); true if `owner` still holds the key here. */
  raise(owner: string, token: bigint): Promise<boolean>;
  /** renew: compare-and-PEXPIRE; false if the key is not `owner`'s. */
  renew(owner: string, ttlMs: number): Promise<boolean>;
  /** release: compare-and-DEL, and notify waiters. */
  release(owner: string): Promise<void>;
  /** subscribe calls `onRelease` with the owner id of every release published on this master. */
  subscribe(onRelease: (owner: string) => void): Promise<() => void>;
}

/** quorum is the majority of n masters. */
export function quorum(n: number): number {
  return Math.floor(n / 2) + 1;
}

/** MASTER_TIMEOUT_MS: how long one master may take to answer before it counts as failed. */
export const MASTER_TIMEOUT_MS = 500;

type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Answers: what each master answered so far, by index; undefined: no answer (yet, or within the bound). */
type Answers<T> = readonly (Settled<T> | undefined)[];

/**
 * gather sends `p` to every master at once and resolves with their answers as soon as `decided`
 * says the answers so far settle the question, or all have answered, or `ms` have passed (the
 * unanswered then stay undefined); never rejects. One timer bounds all the masters together.
 *
 * Resolving at the deciding answer rather than the last is what node-redlock does too: on a busy
 * machine the last of five masters answers well after the third (measured in
 * bench/redis-store-layers.ts --masters 5), and a lock taken or released on a majority is taken
 * or released. The answers that come later are dropped; the requests themselves are already on
 * their connections, and each master runs a connection's commands in the order sent, so a
 * release sent after an acquire still undoes it there.
 */
function gather<M, T>(
  clock: TimerClock,
  ms: number,
  masters: readonly M[],
  p: (m: M) => Promise<T>,
  decided: (answers: Answers<T>) => boolean,
): Promise<Answers<T>> {
  return new Promise((resolve) => {
    const answers: (Settled<T> | undefined)[] = masters.map(() => undefined);
    let left = masters.length;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      timer.cancel();
      resolve(answers);
    };
    const timer = clock.setTimeout(finish, ms);
    const settle = (i: number, a: Settled<T>): void => {
      if (done) return;
      answers[i] = a;
      if (--left === 0 || decided(answers)) finish();
    };
    if (left === 0) finish();
    masters.forEach((m, i) => {
      let call: Promise<T>;
      try {
        call = p(m);
      } catch (err) {
        call = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      call.then(
        (value) => {
          settle(i, { ok: true, value });
        },
        (err: unknown) => {
          settle(i, { ok: false, error: err instanceof Error ? err.message : String(err) });
        },
      );
    });
  });
}

/**
 * refusal explains an acquire that `took` of `n` masters granted, `held` refused (another owner's
 * key) and `failed` answered with an error; the rest did not answer within the bound, or were
 * not waited for when the held ones alone decided it.
 */
function refusal(n: number, took: number, held: number, failed: number): string {
  const q = quorum(n);
  const unanswered = n - took - held - failed;
  const decidedByHeld = held > n - q;
  const silent = decidedByHeld ? failed : failed + unanswered;
  const notWaited = decidedByHeld && unanswered > 0 ? `, ${unanswered} not waited for` : '';
  return `${took} of ${n} masters granted, ${q} needed (${held} held by another owner, ${silent} did not answer${notWaited})`;
}

/** count is how many of `answers` satisfy `f`. */
function count<T>(answers: Answers<T>, f: (a: Settled<T>) => boolean): number {
  let c = 0;
  for (const a of answers) if (a !== undefined && f(a)) c++;
  return c;
}

/** RedlockOptions: the clock the validity is measured on, and the per-master timeout. */
export interface RedlockOptions {
  readonly clock: TimerClock & Clock;
  readonly masterTimeoutMs?: number;
  /** outstanding: where releases still out after their majority answered are kept, for the store's close to wait for. */
  readonly outstanding?: Outstanding;
}

/**
 * Outstanding keeps the requests a quorum decided without (a release done on a majority, the
 * rest still out), so that closing the store waits for them rather than cutting them off: a key
 * left on a minority would keep the lock from a majority that has a master down, for its TTL.
 */
export class Outstanding {
  readonly #out = new Set<Promise<unknown>>();

  /** track keeps `p` until it settles, and returns it. */
  track<T>(p: Promise<T>): Promise<T> {
    this.#out.add(p);
    const drop = (): void => {
      this.#out.delete(p);
    };
    p.then(drop, drop);
    return p;
  }

  /** settled resolves once every tracked request has settled, or after `ms` on `clock`; never rejects. */
  settled(clock: TimerClock, ms: number): Promise<void> {
    if (this.#out.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = clock.setTimeout(resolve, ms);
      void Promise.allSettled([...this.#out]).then(() => {
        timer.cancel();
        resolve();
      });
    });
  }
}

/** redlockBackend is one lock over `masters` (see the module comment). */
export function redlockBackend(masters: readonly MasterPort[], o: RedlockOptions): LockBackend {
  const n = masters.length;
  const q = quorum(n);
  const timeout = o.masterTimeoutMs ?? MASTER_TIMEOUT_MS;
  // A failed attempt gives back what it took on every master, and waits for all of them: the
  // next attempt must not find its own leftovers.
  const releaseAll = async (owner: string): Promise<void> => {
    await gather(
      o.clock,
      timeout,
      masters,
      (m) => m.release(owner),
      () => false,
    );
  };
  return {
    async tryAcquire(owner, ttlMs, floor): Promise<Attempt> {
      // 1. The time before anything is sent: every key's TTL starts after it.
      const startedAt = o.clock.monotonicMs();
      const validity = validUntil(startedAt, ttlMs);
      // Decided once other owners' keys alone keep a majority out of reach (the contended case),
      // or once a majority granted in the steady state: one counter value on all of them, each
      // there before and advanced by the same master process as last time. Then every master
      // that grants later advances from that same value to the same token, and an observer that
      // reads any master naming this owner (stores/observe.ts) reads the holder's token.
      // Otherwise — a new or lost counter, a restarted or failed-over master, counters apart —
      // every answer is waited for and the token is the largest of all, raised where it is not.
      // Masters that fail are waited for too: a refusal then says how many granted.
      const heldThere = (a: Settled<MasterAcquire>): boolean => a.ok && !a.value.ok;
      const steady = (as: Answers<MasterAcquire>): boolean => {
        let value: bigint | undefined;
        let agreeing = 0;
        for (const a of as) {
          if (a === undefined || !a.ok || !a.value.ok) continue;
          if (!a.value.existed || a.value.epochChanged || (value !== undefined && a.value.counter !== value))
            return false;
          value = a.value.counter;
          agreeing++;
        }
        return agreeing >= q;
      };
      const answers = await gather(
        o.clock,
        timeout,
        masters,
        (m) => m.acquire(owner, ttlMs, floor),
        (as) => count(as, heldThere) > n - q || steady(as),
      );
      const took: (Extract<MasterAcquire, { ok: true }> & { readonly master: MasterPort })[] = [];
      let held = 0;
      let heldForMs: number | undefined;
      answers.forEach((a, i) => {
        const master = masters[i];
        if (a === undefined || !a.ok || master === undefined) return;
        if (a.value.ok) took.push({ ...a.value, master });
        else {
          held++;
          heldForMs = Math.min(heldForMs ?? Infinity, a.value.heldForMs);
        }
      });
      // 2. A majority, within the validity.
      if (took.length < q) {
        await releaseAll(owner);
        return {
          granted: false,
          // Held when the others' keys alone keep a majority out of reach (not merely masters down).
          held: held > n - q,
          ...(heldForMs !== undefined && heldForMs >= 0 ? { heldForMs } : {}),
          reason: refusal(
            n,
            took.length,
            held,
            count(answers, (a) => !a.ok),
          ),
        };
      }
      if (o.clock.monotonicMs() >= validity) {
        await releaseAll(owner);
        return { granted: false, held: false, reason: 'the validity was spent acquiring a majority' };
      }
      // 3. The token: the largest counter the majority advanced to (each is above the floor).
      let token = floor + 1n;
      for (const t of took) if (t.counter > token) token = t.counter;
      if (token > MAX_TOKEN) {
        await releaseAll(owner);
        throw new Error(`the fencing counter reached its maximum ${MAX_TOKEN}`);
      }
      const counterMissing = took.every((t) => !t.existed);
      const clockFloored = took.some((t) => t.epochChanged);
      // 4. Already at the token on a majority: counted. Else raised on the masters that granted,
      // and counted only when a majority acknowledged it in time.
      if (took.filter((t) => t.counter === token).length >= q)
        return { granted: true, token, counterMissing, clockFloored };
      const acks = await gather(
        o.clock,
        timeout,
        took,
        (t) => t.master.raise(owner, token),
        (as) => count(as, (a) => a.ok && a.value) >= q || count(as, (a) => !(a.ok && a.value)) > took.length - q,
      );
      const acked = count(acks, (a) => a.ok && a.value);
      if (acked < q || o.clock.monotonicMs() >= validity) {
        await releaseAll(owner);
        return {
          granted: false,
          held: false,
          reason:
            acked < q
              ? `${acked} of ${n} masters acknowledged token ${token}, ${q} needed`
              : 'the validity was spent writing the token',
        };
      }
      return { granted: true, token, counterMissing, clockFloored };
    },
    async renew(owner, ttlMs): Promise<RenewAnswer> {
      const answers = await gather(
        o.clock,
        timeout,
        masters,
        (m) => m.renew(owner, ttlMs),
        (as) => count(as, (a) => a.ok && a.value) >= q || count(as, (a) => a.ok && !a.value) > n - q,
      );
      const yes = count(answers, (a) => a.ok && a.value);
      const no = count(answers, (a) => a.ok && !a.value);
      if (yes >= q) return 'renewed';
      // So many masters say "not yours" that a majority is out of reach: lost, no need to wait.
      if (no > n - q) return 'notOwner';
      throw new Error(`${yes} of ${n} masters renewed, ${q} needed (${no} said not the owner)`);
    },
    // A holder's release is done once a majority answered: the lock is then free to be taken by
    // a majority. The rest are on their way (a store's close waits for them: redlock/masters.ts).
    async release(owner): Promise<void> {
      const track = o.outstanding !== undefined ? o.outstanding.track.bind(o.outstanding) : <T>(p: Promise<T>) => p;
      await gather(
        o.clock,
        timeout,
        masters,
        (m) => track(m.release(owner)),
        (as) => count(as, () => true) >= q,
      );
    },
    subscribe: (onRelease) => subscribeAny(masters, onRelease),
  };
}

/** HEARD_OWNERS bounds the owners whose per-master release messages are being counted. */
const HEARD_OWNERS = 64;

/**
 * subscribeAny listens for releases on every master, and resolves as soon as one master listens:
 * a master that is down must not hold up a waiter (its subscription joins when it answers, or
 * never). Rejects only when every master refused. The unsubscribe also ends subscriptions that
 * complete after it.
 *
 * A waiter is told of a release only once a majority of masters published the same owner id: a
 * holder's release publishes on every master it held (a majority), while a failed attempt that
 * gives back the minority it took publishes on fewer. Waking every waiter on those give-backs made
 * them retry in a storm for as long as the holder held (measured by the Go client: 1,395 attempts
 * in one second against a lock held on 3 of 5 masters, 8 once only majorities wake).
 */
function subscribeAny(masters: readonly MasterPort[], onRelease: (owner: string) => void): Promise<() => void> {
  const need = quorum(masters.length);
  const heard = new Map<string, number>();
  const count = (owner: string): void => {
    const n = (heard.get(owner) ?? 0) + 1;
    heard.delete(owner); // re-inserted last: the map's order is oldest first
    if (heard.size >= HEARD_OWNERS) heard.delete(heard.keys().next().value ?? '');
    heard.set(owner, n);
    if (n === need) onRelease(owner);
  };
  let closed = false;
  const offs: (() => void)[] = [];
  const off = (): void => {
    closed = true;
    for (const f of offs.splice(0)) f();
  };
  return new Promise((resolve, reject) => {
    let refused = 0;
    for (const m of masters) {
      m.subscribe(count).then(
        (f) => {
          if (closed) f();
          else offs.push(f);
          resolve(off);
        },
        (err: unknown) => {
          if (++refused === masters.length) reject(new Error('no master accepted the subscription', { cause: err }));
        },
      );
    }
  });
}
