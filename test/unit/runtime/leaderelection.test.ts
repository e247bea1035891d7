import { afterEach, describe, expect, it } from 'vitest';
import { ApiException } from '@kubernetes/client-node';
import type { V1Lease, V1LeaseSpec } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LeaderElector } from '../../../src/runtime/leaderelection.ts';
import type { LeaseClient, LeaseRequestOptions } from '../../../src/runtime/leaderelection.ts';
import {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  validateLeaderElectionConfig,
} from '../../../src/runtime/leaderelection-config.ts';
import type { LeaderElectionConfig, LeaderElectionLogger } from '../../../src/runtime/leaderelection-config.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

// A pino Logger must be usable as the elector's logger without an adapter.
const pinoFits: LeaderElectionLogger = pino({ level: 'silent' });
void pinoFits;

const NS = 'fencepost-system';
const NAME = 'fencepost-controller';
const LEASE = 15_000;
const RENEW = 10_000;
const RETRY = 2_000;

/** apiError is what client-node's generated APIs throw: the Status body as raw response text. */
function apiError(code: number, reason: string): ApiException<string> {
  return new ApiException(code, reason, JSON.stringify({ kind: 'Status', status: 'Failure', reason, code }), {});
}

/** Fault makes every request of a {@link FakeLeases} fail in one way. */
type Fault = 'rejects with 503' | 'hangs until aborted' | 'hangs and ignores the abort';

interface Write {
  readonly at: number;
  readonly op: 'create' | 'replace';
  readonly holder: string | undefined;
}

/**
 * FakeLeases is an in-memory Lease store with the API server's concurrency rules: every write bumps
 * the resourceVersion, a replace with another resourceVersion is a 409 Conflict, a create of an
 * existing Lease a 409 AlreadyExists. Leases cross it as JSON, the way they cross the wire (so
 * MicroTimes come back as strings, as client-node returns them).
 */
class FakeLeases implements LeaseClient {
  readonly #clock: FakeClock;
  readonly #store = new Map<string, V1Lease>();
  #rv = 100;
  /** fault, when set, makes every request fail that way. */
  fault: Fault | undefined;
  /** beforeWrite runs once, before the next create or replace is checked (to let a rival win first). */
  beforeWrite: (() => void) | undefined;
  /** ops lists every request received, in order. */
  readonly ops: string[] = [];
  /** writes lists every accepted write made through the client. */
  readonly writes: Write[] = [];
  /** journal, when set, receives `write:<holder>` for every accepted write (to check ordering). */
  journal: string[] | undefined;

  constructor(clock: FakeClock) {
    this.#clock = clock;
  }

  get(namespace: string, name: string, options?: LeaseRequestOptions): Promise<V1Lease | undefined> {
    return this.#serve('get', options, () => {
      const stored = this.#store.get(`${namespace}/${name}`);
      return stored === undefined ? undefined : wire(stored);
    });
  }

  create(namespace: string, lease: V1Lease, options?: LeaseRequestOptions): Promise<V1Lease> {
    return this.#serve('create', options, () => {
      this.#runBeforeWrite();
      const name = lease.metadata?.name ?? '';
      if (this.#store.has(`${namespace}/${name}`)) throw apiError(409, 'AlreadyExists');
      return this.#accept('create', namespace, name, lease);
    });
  }

  replace(namespace: string, name: string, lease: V1Lease, options?: LeaseRequestOptions): Promise<V1Lease> {
    return this.#serve('replace', options, () => {
      this.#runBeforeWrite();
      const stored = this.#store.get(`${namespace}/${name}`);
      if (stored === undefined) throw apiError(404, 'NotFound');
      if (lease.metadata?.resourceVersion !== stored.metadata?.resourceVersion) throw apiError(409, 'Conflict');
      return this.#accept('replace', namespace, name, lease);
    });
  }

  /** seed stores a Lease as some other process wrote it, without going through the client. */
  seed(spec: V1LeaseSpec): void {
    this.#store.set(
      `${NS}/${NAME}`,
      wire({ metadata: { name: NAME, namespace: NS, resourceVersion: String(++this.#rv) }, spec }),
    );
  }

  /** rival changes the stored Lease as another writer would (a new resourceVersion). */
  rival(change: (lease: V1Lease) => V1Lease): void {
    const stored = this.peek();
    if (stored === undefined) throw new Error('rival needs a stored Lease');
    const next = change(stored);
    this.#store.set(
      `${NS}/${NAME}`,
      wire({ ...next, metadata: { ...next.metadata, resourceVersion: String(++this.#rv) } }),
    );
  }

  /** peek returns the stored Lease (a copy), or undefined. */
  peek(): V1Lease | undefined {
    const stored = this.#store.get(`${NS}/${NAME}`);
    return stored === undefined ? undefined : wire(stored);
  }

  #runBeforeWrite(): void {
    const hook = this.beforeWrite;
    this.beforeWrite = undefined;
    hook?.();
  }

  #accept(op: 'create' | 'replace', namespace: string, name: string, lease: V1Lease): V1Lease {
    const stored = wire({
      ...lease,
      metadata: { ...lease.metadata, name, namespace, resourceVersion: String(++this.#rv) },
    });
    this.#store.set(`${namespace}/${name}`, stored);
    const holder = stored.spec?.holderIdentity;
    this.writes.push({ at: this.#clock.monotonicMs(), op, holder });
    this.journal?.push(`write:${holder ?? '<none>'}`);
    return wire(stored);
  }

  #serve<T>(op: string, options: LeaseRequestOptions | undefined, apply: () => T): Promise<T> {
    this.ops.push(op);
    switch (this.fault) {
      case 'rejects with 503':
        return Promise.reject(apiError(503, 'ServiceUnavailable'));
      case 'hangs until aborted':
        return new Promise<T>((_resolve, reject) => {
          options?.signal?.addEventListener('abort', () => reject(new Error('Aborted by signal')), { once: true });
        });
      case 'hangs and ignores the abort':
        return new Promise<T>(() => undefined);
      case undefined:
        return Promise.resolve().then(apply);
    }
  }
}

function wire(lease: V1Lease): V1Lease {
  return JSON.parse(JSON.stringify(lease)) as V1Lease;
}

interface LogEntry {
  readonly level: 'info' | 'debug' | 'error';
  readonly msg: string;
  readonly obj: object;
}

/** Candidate is one elector under test, with everything it reported. */
interface Candidate {
  readonly elector: LeaderElector;
  readonly cancel: AbortController;
  readonly startedAt: number[];
  readonly stoppedAt: number[];
  readonly newLeaders: string[];
  readonly logs: LogEntry[];
  readonly run: Promise<void>;
  /** term is the signal onStartedLeading received, once it was called. */
  readonly term: AbortSignal | undefined;
  finished: boolean;
}

const running: Candidate[] = [];

afterEach(async () => {
  for (const c of running.splice(0)) {
    c.cancel.abort();
    await c.run.catch(() => undefined);
  }
});

function start(
  identity: string,
  leases: LeaseClient,
  clock: FakeClock,
  overrides: Partial<LeaderElectionConfig> = {},
  journal?: string[],
): Candidate {
  const logs: LogEntry[] = [];
  const startedAt: number[] = [];
  const stoppedAt: number[] = [];
  const newLeaders: string[] = [];
  let term: AbortSignal | undefined;
  const elector = new LeaderElector({
    leases,
    namespace: NS,
    name: NAME,
    identity,
    leaseDurationMs: LEASE,
    renewDeadlineMs: RENEW,
    retryPeriodMs: RETRY,
    clock,
    log: {
      info: (obj, msg) => logs.push({ level: 'info', msg, obj }),
      debug: (obj, msg) => logs.push({ level: 'debug', msg, obj }),
      error: (obj, msg) => logs.push({ level: 'error', msg, obj }),
    },
    random: () => 0,
    callbacks: {
      onStartedLeading(signal) {
        startedAt.push(clock.monotonicMs());
        term = signal;
        journal?.push('started');
        signal.addEventListener('abort', () => journal?.push('term aborted'), { once: true });
      },
      onStoppedLeading() {
        stoppedAt.push(clock.monotonicMs());
        journal?.push('stopped');
      },
      onNewLeader(leader) {
        newLeaders.push(leader);
      },
    },
    ...overrides,
  });
  const cancel = new AbortController();
  const run = elector.run(cancel.signal);
  const candidate: Candidate = {
    elector,
    cancel,
    startedAt,
    stoppedAt,
    newLeaders,
    logs,
    run,
    finished: false,
    get term() {
      return term;
    },
  };
  void run.then(
    () => (candidate.finished = true),
    () => (candidate.finished = true),
  );
  running.push(candidate);
  return candidate;
}

/** launch starts a candidate and lets its first attempt complete at the current time. */
async function launch(
  identity: string,
  leases: LeaseClient,
  clock: FakeClock,
  overrides: Partial<LeaderElectionConfig> = {},
  journal?: string[],
): Promise<Candidate> {
  const candidate = start(identity, leases, clock, overrides, journal);
  await flushAsync();
  return candidate;
}

/** advanceTo moves the fake clock to monotonic time `t`, letting the electors run. */
async function advanceTo(clock: FakeClock, t: number): Promise<void> {
  await clock.advanceAsync(t - clock.monotonicMs());
}

function errorsOf(c: Candidate): LogEntry[] {
  return c.logs.filter((l) => l.level === 'error');
}

describe('validateLeaderElectionConfig', () => {
  const valid = { identity: 'a', namespace: NS, name: NAME } as const;

  it.each([
    { name: 'a zero leaseDurationMs', patch: { leaseDurationMs: 0 }, field: 'leaseDurationMs' },
    { name: 'a NaN leaseDurationMs', patch: { leaseDurationMs: Number.NaN }, field: 'leaseDurationMs' },
    { name: 'an infinite leaseDurationMs', patch: { leaseDurationMs: Infinity }, field: 'leaseDurationMs' },
    { name: 'a negative renewDeadlineMs', patch: { renewDeadlineMs: -1 }, field: 'renewDeadlineMs' },
    { name: 'a zero retryPeriodMs', patch: { retryPeriodMs: 0 }, field: 'retryPeriodMs' },
    { name: 'leaseDurationMs equal to renewDeadlineMs', patch: { leaseDurationMs: 10_000 }, field: 'leaseDurationMs' },
    { name: 'leaseDurationMs below renewDeadlineMs', patch: { leaseDurationMs: 5_000 }, field: 'leaseDurationMs' },
    {
      name: 'renewDeadlineMs equal to 1.2 × retryPeriodMs',
      patch: { renewDeadlineMs: 1_200, retryPeriodMs: 1_000 },
      field: 'renewDeadlineMs',
    },
    { name: 'renewDeadlineMs below retryPeriodMs', patch: { retryPeriodMs: 12_000 }, field: 'renewDeadlineMs' },
    { name: 'an empty identity', patch: { identity: '' }, field: 'identity' },
    { name: 'an empty namespace', patch: { namespace: '' }, field: 'namespace' },
    { name: 'an empty name', patch: { name: '' }, field: 'name' },
  ])('rejects $name with a RangeError naming $field', ({ patch, field }) => {
    const config = { ...valid, ...patch };
    expect(() => validateLeaderElectionConfig(config)).toThrow(RangeError);
    expect(() => validateLeaderElectionConfig(config)).toThrow(new RegExp(`^${field} `));
  });

  it.each([
    { name: 'the defaults (15 s / 10 s / 2 s)', patch: {} },
    { name: 'renewDeadlineMs just above 1.2 × retryPeriodMs', patch: { renewDeadlineMs: 1_201, retryPeriodMs: 1_000 } },
    {
      name: 'the short durations of the integration tests',
      patch: { leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 200 },
    },
  ])('accepts $name', ({ patch }) => {
    expect(() => validateLeaderElectionConfig({ ...valid, ...patch })).not.toThrow();
  });

  it('has client-go defaults', () => {
    expect([DEFAULT_LEASE_DURATION_MS, DEFAULT_RENEW_DEADLINE_MS, DEFAULT_RETRY_PERIOD_MS]).toEqual([
      15_000, 10_000, 2_000,
    ]);
  });

  it('is what the LeaderElector constructor enforces', () => {
    const clock = new FakeClock();
    expect(
      () =>
        new LeaderElector({
          ...valid,
          leases: new FakeLeases(clock),
          clock,
          leaseDurationMs: 10_000,
          callbacks: { onStartedLeading: () => undefined, onStoppedLeading: () => undefined },
        }),
    ).toThrow(/^leaseDurationMs must be greater than renewDeadlineMs/);
  });
});

describe('LeaderElector acquiring', () => {
  const acquiredAt = new Date('2024-06-01T12:00:00Z');

  it.each([
    {
      name: 'creates an absent Lease and leads at once, with no transitions',
      seed: undefined,
      want: { leaseTransitions: 0, keepsAcquireTime: false },
    },
    {
      name: 'takes a released Lease (no holder) at once and counts a transition',
      seed: { leaseDurationSeconds: 1, leaseTransitions: 3, acquireTime: acquiredAt, renewTime: acquiredAt },
      want: { leaseTransitions: 4, keepsAcquireTime: false },
    },
    {
      name: 'takes at once a Lease that names its own identity, keeping acquireTime and transitions',
      seed: {
        holderIdentity: 'a',
        leaseDurationSeconds: 15,
        leaseTransitions: 2,
        acquireTime: acquiredAt,
        renewTime: acquiredAt,
      },
      want: { leaseTransitions: 2, keepsAcquireTime: true },
    },
  ])('$name', async ({ seed, want }) => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    if (seed !== undefined) leases.seed(seed);
    const a = await launch('a', leases, clock);
    await flushAsync();

    expect(a.elector.isLeader()).toBe(true);
    expect(a.startedAt).toEqual([0]);
    expect(a.newLeaders).toEqual(['a']);
    expect(a.elector.getLeader()).toBe('a');
    const spec = leases.peek()?.spec;
    expect(spec?.holderIdentity).toBe('a');
    expect(spec?.leaseDurationSeconds).toBe(15);
    expect(spec?.leaseTransitions).toBe(want.leaseTransitions);
    expect(spec?.renewTime).toBe('2025-01-01T00:00:00.000000Z');
    expect(spec?.acquireTime).toBe(want.keepsAcquireTime ? '2024-06-01T12:00:00.000Z' : '2025-01-01T00:00:00.000000Z');
    expect(errorsOf(a)).toEqual([]);
  });

  it.each([
    { name: 'its renewTime is current', renewOffsetMs: 0, wallJumpMs: 0 },
    { name: 'its renewTime is an hour old', renewOffsetMs: -3_600_000, wallJumpMs: 0 },
    { name: 'its renewTime is an hour in the future', renewOffsetMs: 3_600_000, wallJumpMs: 0 },
    { name: 'the wall clock jumps an hour forward meanwhile', renewOffsetMs: 0, wallJumpMs: 3_600_000 },
    { name: 'the wall clock jumps a day back meanwhile', renewOffsetMs: 0, wallJumpMs: -86_400_000 },
  ])(
    'waits leaseDuration of its own observed time before taking over an unrenewed Lease when $name',
    async ({ renewOffsetMs, wallJumpMs }) => {
      const clock = new FakeClock({ monotonicMs: 50_000 }); // an arbitrary monotonic origin
      const leases = new FakeLeases(clock);
      const renewTime = new Date(clock.now().getTime() + renewOffsetMs);
      leases.seed({
        holderIdentity: 'old',
        leaseDurationSeconds: 15,
        leaseTransitions: 5,
        acquireTime: renewTime,
        renewTime,
      });
      const t0 = clock.monotonicMs();
      const b = await launch('b', leases, clock);
      await advanceTo(clock, t0 + 1_000);
      clock.setWall(new Date(clock.now().getTime() + wallJumpMs));

      await advanceTo(clock, t0 + LEASE - 1);
      expect(b.elector.isLeader()).toBe(false);
      expect(b.elector.getLeader()).toBe('old');
      expect(leases.writes).toEqual([]);

      await advanceTo(clock, t0 + LEASE + RETRY * 2.2);
      expect(b.elector.isLeader()).toBe(true);
      const [startedAt] = b.startedAt;
      expect(startedAt).toBeDefined();
      expect((startedAt ?? 0) - t0).toBeGreaterThanOrEqual(LEASE);
      expect((startedAt ?? 0) - t0).toBeLessThanOrEqual(LEASE + RETRY);
      expect(leases.peek()?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 6 });
      expect(b.newLeaders).toEqual(['old', 'b']);
    },
  );

  it('waits for the record’s leaseDurationSeconds when that is longer than its own leaseDuration', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    leases.seed({ holderIdentity: 'old', leaseDurationSeconds: 60, renewTime: clock.now() });
    const b = await launch('b', leases, clock);

    await advanceTo(clock, 60_000 - 1);
    expect(b.elector.isLeader()).toBe(false);
    await advanceTo(clock, 60_000 + RETRY * 2.2);
    expect(b.startedAt[0]).toBeGreaterThanOrEqual(60_000);
  });

  it('does not take over while the holder keeps renewing, however long it waits', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await flushAsync();
    const b = await launch('b', leases, clock);

    await advanceTo(clock, 10 * LEASE);
    expect(a.elector.isLeader()).toBe(true);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.startedAt).toEqual([]);
    expect(b.elector.getLeader()).toBe('a');
    expect(b.newLeaders).toEqual(['a']);
    expect(new Set(leases.writes.map((w) => w.holder))).toEqual(new Set(['a']));
    expect(leases.writes.length).toBeGreaterThanOrEqual((10 * LEASE) / RETRY);
  });

  it('takes over a crashed holder only after leaseDuration since it last saw a renewal', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock, { releaseOnCancel: false });
    await advanceTo(clock, 500);
    const b = await launch('b', leases, clock);
    await advanceTo(clock, 7_000);

    a.cancel.abort(); // a crash, as far as the Lease can tell: no release
    await advanceTo(clock, 7_001);
    expect(a.finished).toBe(true);
    const lastRenewal = Math.max(...leases.writes.filter((w) => w.holder === 'a').map((w) => w.at));
    expect(lastRenewal).toBe(6_000);
    expect(leases.writes.at(-1)?.holder).toBe('a');

    await advanceTo(clock, lastRenewal + LEASE - 1);
    expect(b.elector.isLeader()).toBe(false);
    await advanceTo(clock, lastRenewal + LEASE + 2 * RETRY * 2.2);
    expect(b.elector.isLeader()).toBe(true);
    expect(b.startedAt[0]).toBeGreaterThanOrEqual(lastRenewal + LEASE);
    expect(leases.peek()?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it.each([
    { random: 0, gaps: [2_000, 2_000] },
    { random: 0.5, gaps: [3_200, 3_200] },
    { random: 0.999, gaps: [4_397.6, 4_397.6] },
  ])(
    'spaces acquire attempts retryPeriod plus random × 1.2 × retryPeriod apart (random $random)',
    async ({ random, gaps }) => {
      const clock = new FakeClock();
      const leases = new FakeLeases(clock);
      leases.seed({ holderIdentity: 'old', leaseDurationSeconds: 15, renewTime: clock.now() });
      const readsAt: number[] = [];
      const get = leases.get.bind(leases);
      leases.get = (...args) => {
        readsAt.push(clock.monotonicMs());
        return get(...args);
      };
      await launch('b', leases, clock, { random: () => random });

      await advanceTo(clock, 9_000);
      const seen = readsAt.slice(1, 3).map((t, i) => t - (readsAt[i] ?? 0));
      expect(seen.map((g) => Math.round(g * 10) / 10)).toEqual(gaps);
    },
  );
});

describe('LeaderElector renewing', () => {
  it('renews every retryPeriod on the fast path, with the cached resourceVersion and no re-read', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await flushAsync();
    expect(leases.ops).toEqual(['get', 'create']);

    await advanceTo(clock, 10 * RETRY);
    expect(leases.ops.slice(2)).toEqual(Array<string>(10).fill('replace'));
    expect(leases.writes.map((w) => w.at)).toEqual([
      0, 2_000, 4_000, 6_000, 8_000, 10_000, 12_000, 14_000, 16_000, 18_000, 20_000,
    ]);
    expect(leases.peek()?.spec).toMatchObject({
      holderIdentity: 'a',
      leaseTransitions: 0,
      acquireTime: '2025-01-01T00:00:00.000000Z',
    });
    expect(a.elector.isLeader()).toBe(true);
    expect(a.elector.healthy()).toBe(true);
  });

  it.each<{ fault: Fault }>([
    { fault: 'rejects with 503' },
    { fault: 'hangs until aborted' },
    { fault: 'hangs and ignores the abort' },
  ])(
    'steps down renewDeadline after its last successful renewal was sent when every request $fault, and reports it once',
    async ({ fault }) => {
      const clock = new FakeClock();
      const leases = new FakeLeases(clock);
      const a = await launch('a', leases, clock);
      await advanceTo(clock, RETRY + 1); // renewed at 2 000
      leases.fault = fault;

      // The term counts from the send of the last successful renewal (the holder core's rule), not
      // from the start of the next round, which came a retryPeriod later (client-go's).
      const lastSent = RETRY;
      await advanceTo(clock, lastSent + RENEW - 1);
      expect(a.elector.isLeader()).toBe(true);
      expect(a.term?.aborted).toBe(false);
      expect(a.stoppedAt).toEqual([]);

      await advanceTo(clock, lastSent + RENEW);
      expect(a.elector.isLeader()).toBe(false);
      expect(a.term?.aborted).toBe(true);
      expect(a.stoppedAt).toEqual([lastSent + RENEW]);
      expect(a.finished).toBe(true);
      expect(a.logs.find((l) => l.msg === 'Stopped leading')?.obj).toMatchObject({ reason: 'RenewDeadlineExceeded' });

      leases.fault = undefined;
      await advanceTo(clock, 10 * LEASE);
      expect(a.stoppedAt).toHaveLength(1);
      expect(a.startedAt).toHaveLength(1);
      expect(leases.peek()?.spec?.holderIdentity).toBe('a'); // never released after losing it
      expect(clock.pendingTimers()).toBe(0);
    },
  );

  it('keeps leading through failures shorter than renewDeadline from its last successful send', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000); // renewed at 2 000: the term holds until 12 000 unless renewed
    leases.fault = 'rejects with 503';
    await advanceTo(clock, 9_000); // the renewals at 4 000, 6 000 and 8 000 fail; the one at 10 000 succeeds
    leases.fault = undefined;

    await advanceTo(clock, 14_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.stoppedAt).toEqual([]);
    expect(leases.writes.at(-1)).toMatchObject({ at: 14_000, holder: 'a' });
  });

  it('steps down at once, without waiting for the deadline, when it finds another holder', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000);
    leases.rival((l) => ({ ...l, spec: { ...l.spec, holderIdentity: 'intruder' } }));

    await advanceTo(clock, 4_000);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.stoppedAt).toEqual([4_000]);
    expect(a.term?.aborted).toBe(true);
    expect(a.newLeaders).toEqual(['a', 'intruder']);
    expect(a.elector.getLeader()).toBe('intruder');
    expect(a.logs.find((l) => l.msg === 'Stopped leading')?.obj).toMatchObject({ reason: 'LeaseTakenOver' });
    expect(leases.peek()?.spec?.holderIdentity).toBe('intruder');
    expect(errorsOf(a)).toEqual([]);
  });
});

describe('LeaderElector conflicts', () => {
  it('re-reads after a fast-path 409 that left the record unchanged, and keeps leading', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000);
    leases.rival((l) => ({ ...l, metadata: { ...l.metadata, labels: { team: 'platform' } } }));

    await advanceTo(clock, 4_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(leases.ops.slice(-3)).toEqual(['replace', 'get', 'replace']);
    expect(leases.writes.at(-1)).toMatchObject({ at: 4_000, holder: 'a' });
    expect(leases.peek()?.metadata?.labels).toEqual({ team: 'platform' });
    expect(a.logs).toContainEqual(
      expect.objectContaining({ level: 'debug', msg: 'Failed to renew leader Lease with cached resourceVersion' }),
    );
    expect(errorsOf(a)).toEqual([]);
  });

  it('follows the winner after losing the race (409) to take a free Lease', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    leases.seed({ leaseDurationSeconds: 1, leaseTransitions: 1 });
    leases.beforeWrite = () =>
      leases.rival((l) => ({
        ...l,
        spec: { ...l.spec, holderIdentity: 'c', leaseTransitions: 2, renewTime: clock.now() },
      }));
    const b = await launch('b', leases, clock);
    await flushAsync();

    expect(b.elector.isLeader()).toBe(false);
    expect(b.logs).toContainEqual(expect.objectContaining({ level: 'debug', msg: 'Lost race to update leader Lease' }));
    await advanceTo(clock, RETRY);
    expect(b.elector.getLeader()).toBe('c');
    await advanceTo(clock, LEASE - 1);
    expect(b.elector.isLeader()).toBe(false);
    expect(leases.peek()?.spec).toMatchObject({ holderIdentity: 'c', leaseTransitions: 2 });
    expect(errorsOf(b)).toEqual([]);
  });

  it('lets exactly one of two candidates create an absent Lease; the other follows without an error', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = start('a', leases, clock);
    const b = start('b', leases, clock);
    await flushAsync();

    expect([a.elector.isLeader(), b.elector.isLeader()]).toEqual([true, false]);
    expect(leases.ops.slice(0, 4)).toEqual(['get', 'get', 'create', 'create']);
    expect(b.logs).toContainEqual(expect.objectContaining({ level: 'debug', msg: 'Lost race to create leader Lease' }));
    await advanceTo(clock, 5 * LEASE);
    expect([a.elector.isLeader(), b.elector.isLeader()]).toEqual([true, false]);
    expect(b.elector.getLeader()).toBe('a');
    expect(errorsOf(a)).toEqual([]);
    expect(errorsOf(b)).toEqual([]);
  });
});

describe('LeaderElector releasing', () => {
  it('on cancel aborts the term, releases the Lease, calls onStoppedLeading, and a waiting candidate takes over at its next attempt', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const journal: string[] = [];
    leases.journal = journal;
    const a = await launch('a', leases, clock, {}, journal);
    await advanceTo(clock, 1_000);
    const b = await launch('b', leases, clock);
    await advanceTo(clock, 4_500);
    journal.length = 0;

    a.cancel.abort();
    await flushAsync();
    expect(a.finished).toBe(true);
    expect(journal).toEqual(['term aborted', 'write:<none>', 'stopped']);
    expect(a.stoppedAt).toEqual([4_500]);
    const released = leases.peek()?.spec;
    expect(released?.holderIdentity).toBeUndefined();
    expect(released?.leaseDurationSeconds).toBe(1);
    expect(released?.leaseTransitions).toBe(0);
    expect(a.elector.getLeader()).toBeUndefined();
    expect(a.elector.healthy()).toBe(true);

    await advanceTo(clock, 4_500 + RETRY * 2.2);
    expect(b.elector.isLeader()).toBe(true);
    expect(b.startedAt[0]).toBe(5_000); // its next attempt, not leaseDuration later
    expect(leases.peek()?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it('with releaseOnCancel false, leaves the Lease to expire on cancel', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock, { releaseOnCancel: false });
    await advanceTo(clock, 3_000);
    const writes = leases.writes.length;

    a.cancel.abort();
    await flushAsync();
    expect(a.finished).toBe(true);
    expect(a.stoppedAt).toEqual([3_000]);
    expect(leases.writes).toHaveLength(writes);
    expect(leases.peek()?.spec?.holderIdentity).toBe('a');
  });

  it('releases by compare-and-swap only: a Lease taken over meanwhile stays with its new holder', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000);
    leases.rival((l) => ({ ...l, spec: { ...l.spec, holderIdentity: 'intruder' } }));

    a.cancel.abort();
    await flushAsync();
    expect(a.finished).toBe(true);
    expect(a.stoppedAt).toEqual([3_000]);
    expect(leases.peek()?.spec?.holderIdentity).toBe('intruder');
    expect(a.logs).toContainEqual(
      expect.objectContaining({ msg: 'Skipped release of leader Lease held by another candidate' }),
    );
    expect(a.newLeaders).toEqual(['a', 'intruder']);
  });

  it('re-reads after a 409 on release and releases the Lease when it still names itself', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000);
    leases.rival((l) => ({ ...l, metadata: { ...l.metadata, labels: { team: 'platform' } } }));

    a.cancel.abort();
    await flushAsync();
    expect(a.finished).toBe(true);
    expect(leases.ops.slice(-3)).toEqual(['replace', 'get', 'replace']);
    expect(leases.peek()?.spec).toMatchObject({ leaseDurationSeconds: 1, leaseTransitions: 0 });
    expect(leases.peek()?.spec?.holderIdentity).toBeUndefined();
    expect(leases.peek()?.metadata?.labels).toEqual({ team: 'platform' });
    expect(errorsOf(a)).toEqual([]);
  });

  it('gives up a release that fails for renewDeadline and leaves the Lease to expire', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, 3_000);
    leases.fault = 'hangs and ignores the abort';

    a.cancel.abort();
    await flushAsync(); // the release starts now, at 3 000
    await advanceTo(clock, 3_000 + RENEW - 1);
    expect(a.finished).toBe(false);
    expect(a.term?.aborted).toBe(true); // the term ends before the release is even tried
    await advanceTo(clock, 3_000 + RENEW);
    expect(a.finished).toBe(true);
    expect(a.stoppedAt).toEqual([3_000 + RENEW]);
    expect(errorsOf(a).map((l) => l.msg)).toEqual(['Failed to release leader Lease']);
    expect(leases.peek()?.spec?.holderIdentity).toBe('a');
  });

  it('on cancel before ever leading resolves without calling either callback or writing', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    leases.seed({ holderIdentity: 'old', leaseDurationSeconds: 15, renewTime: clock.now() });
    const b = await launch('b', leases, clock);
    await advanceTo(clock, 5_000);

    b.cancel.abort();
    await flushAsync();
    expect(b.finished).toBe(true);
    expect(b.startedAt).toEqual([]);
    expect(b.stoppedAt).toEqual([]);
    expect(leases.writes).toEqual([]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('can run only once', async () => {
    const clock = new FakeClock();
    const a = start('a', new FakeLeases(clock), clock);
    await expect(a.elector.run(new AbortController().signal)).rejects.toThrow(/already called/);
  });
});

describe('LeaderElector health', () => {
  it('turns unhealthy once leaseDuration + tolerance passed since its last renewal while it still appears as the holder', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    const a = await launch('a', leases, clock);
    await advanceTo(clock, RETRY + 1); // last renewal at 2 000
    leases.fault = 'rejects with 503';

    await advanceTo(clock, 2 * RETRY + RENEW); // stepped down, but the process did not exit
    expect(a.elector.isLeader()).toBe(false);
    expect(a.elector.healthy()).toBe(true);
    await advanceTo(clock, RETRY + LEASE);
    expect(a.elector.healthy()).toBe(true);
    await advanceTo(clock, RETRY + LEASE + 1);
    expect(a.elector.healthy()).toBe(false);
    expect(a.elector.healthy(5_000)).toBe(true);
    await advanceTo(clock, RETRY + LEASE + 5_001);
    expect(a.elector.healthy(5_000)).toBe(false);
  });

  it('is always healthy for a candidate that does not lead', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases(clock);
    await launch('a', leases, clock);
    await flushAsync();
    const b = await launch('b', leases, clock);
    leases.fault = 'rejects with 503';
    await advanceTo(clock, 10 * LEASE);
    expect(b.elector.healthy()).toBe(true);
  });
});
