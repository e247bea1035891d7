/**
 * Bounded requests of the holder side (HeldLock.release/complete, `fencepost exec` after a loss):
 * the AbortSignal given to LockSession.release, withdraw and complete reaches the requests, which
 * are aborted on the wire — not merely no longer awaited — so that nothing keeps a connection (and
 * the process) alive for an API server that does not answer.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { V1Lease } from '@kubernetes/client-node';
import { MutexRequests } from '../../../src/agent/mutex-requests.ts';
import { RunCompletions } from '../../../src/agent/run-completions.ts';
import { LockSession, type LeaseInformer } from '../../../src/agent/session.ts';
import type { LeaseClient, LeaseRequestOptions } from '../../../src/runtime/leaderelection.ts';
import { grantedLease } from '../../../src/lease/record.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { leaseName, LOCK_LABEL } from '../../../src/protocol/names.ts';
import type { ChangeHandler } from '../../../src/runtime/informer.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

const SELF = { name: 'web-0', uid: 'uid-0' };
const TIMINGS = { leaseDurationMs: 3000, renewDeadlineMs: 2000, renewPeriodMs: 1000 };

describe('MutexRequests with a bound, against an API server that never answers', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => {
      server?.close(() => {
        r();
      });
    });
    server = undefined;
  });

  /** hang: an HTTP server that reads requests and never answers; `closed` resolves when the client hangs up. */
  const hang = async (): Promise<{
    m: MutexRequests;
    r: RunCompletions;
    received: Promise<void>;
    closed: Promise<void>;
  }> => {
    const received = Promise.withResolvers<void>();
    const closed = Promise.withResolvers<void>();
    server = createServer((req: IncomingMessage) => {
      received.resolve();
      req.socket.on('close', () => {
        closed.resolve();
      });
      req.resume();
    });
    await new Promise<void>((r) => {
      server?.listen(0, '127.0.0.1', r);
    });
    const api = apiClientFor(`http://127.0.0.1:${(server?.address() as AddressInfo).port}`);
    const o = { api, namespace: 'ns', lock: 'db', self: SELF, clock: new FakeClock() };
    return { m: new MutexRequests(o), r: new RunCompletions(o), received: received.promise, closed: closed.promise };
  };

  it.each([
    { name: 'withdraw', call: (m: MutexRequests, _r: RunCompletions, signal: AbortSignal) => m.withdraw({ signal }) },
    {
      name: 'complete',
      call: (_m: MutexRequests, r: RunCompletions, signal: AbortSignal) => r.complete('run-1', 5n, { signal }),
    },
  ])('$name rejects when the signal aborts and closes the connection', async ({ call }) => {
    const { m, r, received, closed } = await hang();
    const ac = new AbortController();
    const pending = call(m, r, ac.signal);
    pending.catch(() => undefined);
    await received; // the request is on the wire
    const abortedAt = performance.now();
    ac.abort(new Error('window over'));
    await expect(pending).rejects.toThrow();
    await closed; // cancelled on the wire: the server saw the client hang up
    expect(performance.now() - abortedAt).toBeLessThan(1000);
  });

  it('an already aborted signal sends nothing that waits', async () => {
    const { m } = await hang();
    await expect(m.withdraw({ signal: AbortSignal.abort(new Error('too late')) })).rejects.toThrow();
  });
});

/** World: a session holding token 5, whose Lease writes hang (until aborted) once `hangWrites` is set. */
class World {
  readonly clock = new FakeClock();
  readonly session: LockSession;
  hangWrites = false;
  /** signals: the options each hung write was sent with. */
  readonly signals: (AbortSignal | undefined)[] = [];
  #lease: V1Lease = {
    metadata: { name: leaseName('db'), namespace: 'ns', resourceVersion: '1', labels: { [LOCK_LABEL]: 'db' } },
    spec: {},
  };
  #rv = 1;
  readonly #handlers: ChangeHandler<V1Lease>[] = [];

  constructor() {
    const informer: LeaseInformer = {
      start: () => Promise.resolve(),
      get: () => this.#lease,
      stop: () => Promise.resolve(),
      onChange: (h) => {
        this.#handlers.push(h);
      },
    };
    const leases: LeaseClient = {
      get: () => Promise.resolve(this.#lease),
      replace: (_ns, _name, body, options?: LeaseRequestOptions) => {
        if (!this.hangWrites) return Promise.resolve(this.#store(body));
        this.signals.push(options?.signal);
        return new Promise<V1Lease>((_resolve, reject) => {
          options?.signal?.addEventListener('abort', () => {
            reject(new Error('The operation was aborted'));
          });
        });
      },
      create: () => Promise.reject(new Error('agents do not create Leases')),
    };
    this.session = new LockSession({
      api: apiClientFor('http://127.0.0.1:9'),
      namespace: 'ns',
      lock: 'db',
      self: SELF,
      clock: this.clock,
      log: silentLogger,
      leases,
      leaseInformer: informer,
      random: () => 0,
    });
  }

  static async holding(): Promise<World> {
    const w = new World();
    await w.session.start();
    w.#store(grantedLease(w.#lease, SELF, 5n, TIMINGS, w.clock.now()));
    for (const h of w.#handlers) h(w.#lease, 'update');
    await flushAsync();
    await flushAsync();
    return w;
  }

  #store(body: V1Lease): V1Lease {
    this.#rv++;
    this.#lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(this.#rv) } };
    return this.#lease;
  }
}

describe('LockSession.release with a bound', () => {
  it('hands the signal to the Lease write and rejects once it aborts; the term has ended all the same', async () => {
    const w = await World.holding();
    expect(w.session.heldToken()).toBe(5n);
    w.hangWrites = true;
    const ac = new AbortController();
    const released = w.session.release({ signal: ac.signal });
    released.catch(() => undefined);
    await flushAsync();
    expect(w.signals).toHaveLength(1);
    expect(w.signals[0]?.aborted).toBe(false);
    expect(w.session.snapshot()).toMatchObject({ held: false, state: 'released' });

    ac.abort(new Error('window over'));
    await expect(released).rejects.toThrow(/Failed to release Lease dlock-db/);
    expect(w.signals[0]?.aborted).toBe(true);
    await w.session.stop();
  });

  it('without a bound, the Lease write gets no signal of the caller (it waits as long as the client does)', async () => {
    const w = await World.holding();
    w.hangWrites = true;
    const released = w.session.release();
    released.catch(() => undefined);
    await flushAsync();
    expect(w.signals).toEqual([undefined]);
    await w.session.stop();
  });
});
