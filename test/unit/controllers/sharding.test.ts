import { ApiException, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { assignShards, lockShard, shardsOf } from '../../../src/controllers/sharding/assign.ts';
import {
  MEMBER_LABEL,
  ShardManager,
  shardLeaseName,
  type MemberLister,
} from '../../../src/controllers/sharding/shard-manager.ts';
import type { LeaseClient, LeaseRequestOptions } from '../../../src/runtime/leaderelection.ts';
import type { ObjectKey } from '../../../src/runtime/controller.ts';
import { FakeClock } from '../../support/fake-clock.ts';

describe('lockShard', () => {
  it('puts every lock in shard 0 when there is one shard', () => {
    expect(lockShard('ns/a', 1)).toBe(0);
  });

  it('is stable and spreads 10,000 locks over 16 shards within 25% of an even share', () => {
    const counts = Array.from({ length: 16 }, () => 0);
    for (let i = 0; i < 10_000; i++) {
      const s = lockShard(`team-${i % 7}/lock-${i}`, 16);
      expect(lockShard(`team-${i % 7}/lock-${i}`, 16)).toBe(s);
      counts[s] = (counts[s] ?? 0) + 1;
    }
    for (const c of counts) expect(Math.abs(c - 625)).toBeLessThan(625 * 0.25);
  });

  it('moves about one lock in 17 when a 17th shard is added, and only to the new shard', () => {
    let moved = 0;
    for (let i = 0; i < 10_000; i++) {
      const before = lockShard(`ns/lock-${i}`, 16);
      const after = lockShard(`ns/lock-${i}`, 17);
      if (before !== after) {
        moved++;
        expect(after).toBe(16);
      }
    }
    expect(moved).toBeGreaterThan(10_000 / 17 / 2);
    expect(moved).toBeLessThan((10_000 / 17) * 2);
  });
});

describe('assignShards', () => {
  it('assigns nothing without members', () => {
    expect(assignShards(4, [])).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('gives one member every shard', () => {
    expect(assignShards(3, ['a'])).toEqual(['a', 'a', 'a']);
  });

  it.each([
    { shards: 16, members: 3 },
    { shards: 32, members: 5 },
    { shards: 7, members: 7 },
    { shards: 3, members: 5 },
  ])('deals $shards shards to $members members within one of an even share', ({ shards, members }) => {
    const names = Array.from({ length: members }, (_, i) => `replica-${i}`);
    const a = assignShards(shards, names);
    expect(a.every((m) => m !== undefined)).toBe(true);
    for (const n of names) {
      const mine = shardsOf(a, n).length;
      expect(mine).toBeGreaterThanOrEqual(Math.floor(shards / members));
      expect(mine).toBeLessThanOrEqual(Math.ceil(shards / members));
    }
  });

  it('depends on the member set only, not on its order or duplicates', () => {
    expect(assignShards(16, ['c', 'a', 'b', 'a'])).toEqual(assignShards(16, ['a', 'b', 'c']));
  });

  it('moves few shards besides the leaver’s when one of four members leaves', () => {
    const before = assignShards(32, ['a', 'b', 'c', 'd']);
    const after = assignShards(32, ['a', 'b', 'c']);
    let movedBetweenStayers = 0;
    for (let s = 0; s < 32; s++) if (before[s] !== 'd' && before[s] !== after[s]) movedBetweenStayers++;
    expect(shardsOf(after, 'd')).toEqual([]);
    // The leaver's 8 must move; the 24 others mostly stay where they were.
    expect(movedBetweenStayers).toBeLessThanOrEqual(8);
  });
});

/** apiError is what client-node throws: the Status body as raw text. */
function apiError(code: number, reason: string): ApiException<string> {
  return new ApiException(code, reason, JSON.stringify({ kind: 'Status', reason, code }), {});
}

/**
 * SharedLeases is an in-memory Lease store with the API server's rules (resourceVersion CAS,
 * AlreadyExists) shared by several replicas; `cut` makes one replica's requests fail, as a
 * replica that died or was cut off.
 */
class SharedLeases {
  readonly #store = new Map<string, V1Lease>();
  #rv = 1;
  readonly cut = new Set<string>();

  clientFor(who: string): LeaseClient & MemberLister {
    const check = (o?: LeaseRequestOptions): void => {
      if (this.cut.has(who)) throw apiError(503, 'ServiceUnavailable');
      o?.signal?.throwIfAborted();
    };
    const copy = (l: V1Lease): V1Lease => JSON.parse(JSON.stringify(l)) as V1Lease;
    return {
      get: (ns, name, o) =>
        Promise.resolve().then(() => {
          check(o);
          const l = this.#store.get(`${ns}/${name}`);
          return l === undefined ? undefined : copy(l);
        }),
      create: (ns, lease, o) =>
        Promise.resolve().then(() => {
          check(o);
          const key = `${ns}/${lease.metadata?.name ?? ''}`;
          if (this.#store.has(key)) throw apiError(409, 'AlreadyExists');
          const stored = { ...copy(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.#rv) } };
          this.#store.set(key, stored);
          return copy(stored);
        }),
      replace: (ns, name, lease, o) =>
        Promise.resolve().then(() => {
          check(o);
          const key = `${ns}/${name}`;
          const cur = this.#store.get(key);
          if (cur === undefined) throw apiError(404, 'NotFound');
          if (cur.metadata?.resourceVersion !== lease.metadata?.resourceVersion) throw apiError(409, 'Conflict');
          const stored = { ...copy(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.#rv) } };
          this.#store.set(key, stored);
          return copy(stored);
        }),
      list: (ns, selector, signal) =>
        Promise.resolve().then(() => {
          check({ signal });
          const [k, v] = selector.split('=');
          return [...this.#store.entries()]
            .filter(([key, l]) => key.startsWith(`${ns}/`) && k !== undefined && l.metadata?.labels?.[k] === v)
            .map(([, l]) => copy(l));
        }),
    };
  }

  holder(name: string): string | undefined {
    return this.#store.get(`ns/${name}`)?.spec?.holderIdentity ?? undefined;
  }
}

const SHARDS = 12;
const silent = { info: () => undefined, debug: () => undefined, error: () => undefined };

function replica(clock: FakeClock, leases: SharedLeases, member: string, lost: string[]): ShardManager {
  const client = leases.clientFor(member);
  return new ShardManager({
    leases: client,
    members: client,
    namespace: 'ns',
    id: 'fp',
    member,
    identity: `${member}_1`,
    shards: SHARDS,
    leaseDurationMs: 3000,
    renewDeadlineMs: 2000,
    retryPeriodMs: 500,
    clock,
    log: silent,
    onMembershipLost: () => lost.push(member),
  });
}

/** run advances the fake clock in retry-period steps, letting the managers' requests settle. */
async function run(clock: FakeClock, ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 100) await clock.advanceAsync(100);
}

describe('ShardManager', () => {
  it('shares the shards among three replicas, each held by exactly one, and moves a dead one’s shards', async () => {
    const clock = new FakeClock();
    const leases = new SharedLeases();
    const lost: string[] = [];
    const r = ['a', 'b', 'c'].map((m) => replica(clock, leases, m, lost));
    for (const m of r) await m.start();
    await run(clock, 12_000);

    const owned = r.map((m) => m.owned());
    expect(owned.flat().sort((x, y) => x - y)).toEqual(Array.from({ length: SHARDS }, (_, i) => i));
    for (const o of owned) expect(o).toHaveLength(SHARDS / 3);
    for (let s = 0; s < SHARDS; s++) expect(leases.holder(shardLeaseName('fp', s))).toMatch(/^[abc]_1$/);
    expect(leases.holder('fp-member-a')).toBe('a_1');
    const key = (s: number): ObjectKey => {
      for (let i = 0; ; i++) if (lockShard(`ns/l-${i}`, SHARDS) === s) return `ns/l-${i}`;
    };
    // owns follows the shard Lease: exactly one replica acts for any lock.
    for (let s = 0; s < SHARDS; s++) expect(r.filter((m) => m.owns(key(s)))).toHaveLength(1);

    // c dies (every request fails): it stops acting at its renew deadline, before its Leases
    // expire for the others, which then take its shards over.
    const c = r[2];
    if (c === undefined) throw new Error('no replica');
    const cShards = c.owned();
    leases.cut.add('c');
    await run(clock, 2600);
    expect(c.owned()).toEqual([]);
    expect(lost).toEqual(['c']);
    await run(clock, 12_000);
    const survivors = r.slice(0, 2);
    expect(survivors.flatMap((m) => m.owned()).sort((x, y) => x - y)).toEqual(
      Array.from({ length: SHARDS }, (_, i) => i),
    );
    for (const s of cShards) expect(survivors.filter((m) => m.owns(key(s)))).toHaveLength(1);
    for (const m of survivors) await m.stop();
  });

  it('gives a shard up only after its reconciles in flight ended when a replica joins', async () => {
    const clock = new FakeClock();
    const leases = new SharedLeases();
    const a = replica(clock, leases, 'a', []);
    await a.start();
    await run(clock, 4000);
    expect(a.owned()).toHaveLength(SHARDS);
    let gained = 0;
    const b = replica(clock, leases, 'b', []);
    b.onGained(() => gained++);

    // A reconcile of every shard of a is in flight (they end when the test says so).
    let finish = (): void => undefined;
    const pending = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const keys: ObjectKey[] = [];
    for (let s = 0; s < SHARDS; s++)
      for (let i = 0; ; i++)
        if (lockShard(`ns/k-${i}`, SHARDS) === s) {
          keys.push(`ns/k-${i}`);
          break;
        }
    const runs = keys.map((k) => a.run(k, () => pending.then(() => 'done')));
    await b.start();
    await run(clock, 6000);
    // a stopped taking the keys of the shards b is assigned, but holds their Leases: b waits.
    const toMove = keys.filter((k) => !a.owns(k));
    expect(toMove.length).toBe(SHARDS / 2);
    expect(b.owned()).toEqual([]);
    expect(await a.run(toMove[0] ?? 'ns/x', () => Promise.resolve('ran'))).toBeUndefined();

    finish();
    expect(await Promise.all(runs)).toEqual(keys.map(() => 'done'));
    await run(clock, 6000);
    expect(b.owned()).toHaveLength(SHARDS / 2);
    expect(a.owned()).toHaveLength(SHARDS / 2);
    expect(gained).toBe(SHARDS / 2);
    for (const k of toMove) {
      expect(b.owns(k)).toBe(true);
      expect(a.owns(k)).toBe(false);
    }
    await b.stop();
    await run(clock, 4000);
    // b left cleanly (released its Leases): a holds every shard again.
    expect(a.owned()).toHaveLength(SHARDS);
    await a.stop();
  });

  it('labels the membership Lease so the others can list it', async () => {
    const clock = new FakeClock();
    const leases = new SharedLeases();
    const a = replica(clock, leases, 'a', []);
    await a.start();
    await run(clock, 1000);
    const listed = await leases.clientFor('x').list('ns', `${MEMBER_LABEL}=fp`, new AbortController().signal);
    expect(listed.map((l) => l.metadata?.name)).toEqual(['fp-member-a']);
    await a.stop();
  });

  it('refuses a member name that cannot name a Lease', () => {
    const leases = new SharedLeases();
    expect(() => replica(new FakeClock(), leases, 'Bad_Name', [])).toThrow(/member must be a lower-case DNS name/);
  });
});
