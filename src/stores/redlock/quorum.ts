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

/** ask runs `p` bounded by `ms` on `clock`; never rejects. */
async function ask<T>(clock: TimerClock, ms: number, p: () => Promise<T>): Promise<Settled<T>> {
  let timer: { cancel(): void } | undefined;
  try {
    const value = await Promise.race([
      p(),
      new Promise<never>((_, reject) => {
        timer = clock.setTimeout(() => {
          reject(new Error(`no answer within ${ms} ms`));
        }, ms);
      }),
    ]);
    return { ok: true, value };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  } finally {
    timer?.cancel();
  }
}

/** RedlockOptions: the clock the validity is measured on, and the per-master timeout. */
export interface RedlockOptions {
  readonly clock: TimerClock & Clock;
  readonly masterTimeoutMs?: number;
}

/** redlockBackend is one lock over `masters` (see the module comment). */
export function redlockBackend(masters: readonly MasterPort[], o: RedlockOptions): LockBackend {
  const n = masters.length;
  const q = quorum(n);
  const timeout = o.masterTimeoutMs ?? MASTER_TIMEOUT_MS;
  const releaseAll = async (owner: string): Promise<void> => {
    await Promise.all(masters.map((m) => ask(o.clock, timeout, () => m.release(owner))));
  };
  return {
    async tryAcquire(owner, ttlMs, floor): Promise<Attempt> {
      // 1. The time before anything is sent: every key's TTL starts after it.
      const startedAt = o.clock.monotonicMs();
      const validity = validUntil(startedAt, ttlMs);
      const answers = await Promise.all(
        masters.map((m) => ask(o.clock, timeout, () => m.acquire(owner, ttlMs, floor))),
      );
      const took: (Extract<MasterAcquire, { ok: true }> & { readonly master: MasterPort })[] = [];
      let held = 0;
      let heldForMs: number | undefined;
      answers.forEach((a, i) => {
        const master = masters[i];
        if (!a.ok || master === undefined) return;
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
          reason: `${took.length} of ${n} masters granted, ${q} needed (${held} held by another owner, ${n - took.length - held} did not answer)`,
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
      const acks = await Promise.all(took.map((t) => ask(o.clock, timeout, () => t.master.raise(owner, token))));
      const acked = acks.filter((a) => a.ok && a.value).length;
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
      const answers = await Promise.all(masters.map((m) => ask(o.clock, timeout, () => m.renew(owner, ttlMs))));
      const yes = answers.filter((a) => a.ok && a.value).length;
      const no = answers.filter((a) => a.ok && !a.value).length;
      if (yes >= q) return 'renewed';
      // So many masters say "not yours" that a majority is out of reach: lost, no need to wait.
      if (no > n - q) return 'notOwner';
      throw new Error(`${yes} of ${n} masters renewed, ${q} needed (${no} said not the owner)`);
    },
    release: releaseAll,
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
