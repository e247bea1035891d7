/**
 * ListWatchInformer's supervision on a fake clock with a scripted API (the real API server's
 * list, watch and 410 are in test/integration/transport/client.test.ts): restarts with jittered
 * exponential backoff, keeping the cache and resuming the watch from the last resourceVersion,
 * the sync timeout, and stop.
 */
import { describe, expect, it } from 'vitest';
import type { ApiClient, RequestSpec, WatchHandlers } from '../../../src/transport/client.ts';
import { ListWatchInformer, type ChangeKind } from '../../../src/transport/informer.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

interface Obj {
  metadata: { name: string; namespace: string; resourceVersion: string };
}
const obj = (name: string, rv: string): Obj => ({ metadata: { name, namespace: 'ns', resourceVersion: rv } });

/** ScriptedApi answers lists and watches from queues the test fills; it records what was asked. */
class ScriptedApi {
  readonly lists: (() => Promise<unknown>)[] = [];
  readonly watches: ((h: WatchHandlers, signal: AbortSignal | undefined) => Promise<void>)[] = [];
  readonly asked: string[] = [];
  request<T>(_spec: RequestSpec): Promise<T> {
    this.asked.push('list');
    const next = this.lists.shift();
    return (next?.() ?? new Promise(() => undefined)) as Promise<T>;
  }
  watch(spec: { query?: Record<string, unknown>; signal?: AbortSignal | undefined }, h: WatchHandlers): Promise<void> {
    this.asked.push(`watch@${String(spec.query?.resourceVersion)}`);
    const next = this.watches.shift();
    if (next !== undefined) return next(h, spec.signal);
    // No script: an open watch that ends only on abort.
    h.onOpen?.();
    return new Promise((_resolve, reject) => {
      spec.signal?.addEventListener('abort', () => {
        reject(new Error('aborted'));
      });
    });
  }
}

const refused = (): Promise<never> =>
  Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }));

function informerOn(api: ScriptedApi, clock: FakeClock, o: { syncTimeoutMs?: number } = {}) {
  const errors: unknown[] = [];
  const states: boolean[] = [];
  const inf = new ListWatchInformer<Obj>({
    name: 'test',
    api: api as unknown as ApiClient,
    path: '/apis/x/v1/namespaces/ns/things',
    clock,
    random: () => 0, // delays are exactly half their ceiling
    log: { info() {}, debug() {}, error: (o) => errors.push(o) },
    onStateChange: (w) => states.push(w),
    ...o,
  });
  const seen: [ChangeKind, string, string][] = [];
  inf.onChange((x, kind) => seen.push([kind, x.metadata.name, x.metadata.resourceVersion]));
  return { inf, errors, states, seen };
}

describe('ListWatchInformer', () => {
  it('retries a failed first list after 100, 200, 400 ms (base 200 ms, equal jitter), then syncs', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    api.lists.push(refused, refused, refused, () =>
      Promise.resolve({ metadata: { resourceVersion: '10' }, items: [obj('a', '5')] }),
    );
    const { inf, errors, states, seen } = informerOn(api, clock);
    let synced = false;
    void inf.start().then(() => (synced = true));
    await flushAsync();
    expect(api.asked).toEqual(['list']);
    for (const ms of [100, 200, 400]) {
      clock.advance(ms - 1);
      await flushAsync();
      expect(synced).toBe(false);
      clock.advance(1);
      await flushAsync();
    }
    expect(api.asked).toEqual(['list', 'list', 'list', 'list', 'watch@10']);
    expect(synced).toBe(true);
    expect(inf.hasSynced()).toBe(true);
    expect(inf.watching()).toBe(true);
    expect(states).toEqual([true]);
    expect(seen).toEqual([['add', 'a', '5']]);
    expect(errors).toHaveLength(3);
    await inf.stop();
    expect(inf.watching()).toBe(false);
  });

  it('after a watch fails, keeps the cache and resumes from the last resourceVersion (no relist), reporting not-watching meanwhile', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    api.lists.push(() => Promise.resolve({ metadata: { resourceVersion: '10' }, items: [obj('a', '5')] }));
    api.watches.push(async (h) => {
      h.onOpen?.();
      h.onEvent('MODIFIED', obj('a', '11'));
      h.onEvent('BOOKMARK', { metadata: { resourceVersion: '12' } });
      await Promise.resolve();
      throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    });
    api.watches.push((h) => {
      h.onOpen?.();
      h.onEvent('DELETED', obj('a', '13'));
      return Promise.resolve(); // a clean end: watched again at once
    });
    const { inf, states, seen } = informerOn(api, clock);
    await inf.start();
    await flushAsync();
    expect(inf.watching()).toBe(false);
    clock.advance(100);
    await flushAsync();
    expect(api.asked).toEqual(['list', 'watch@10', 'watch@12', 'watch@13']);
    expect(states).toEqual([true, false, true]);
    expect(seen).toEqual([
      ['add', 'a', '5'],
      ['update', 'a', '11'],
      ['delete', 'a', '13'],
    ]);
    expect(inf.list()).toEqual([]);
    await inf.stop();
  });

  it('rejects start() after the sync timeout with the last failure as cause, and keeps retrying until stopped', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    for (let i = 0; i < 20; i++) api.lists.push(refused);
    const { inf } = informerOn(api, clock, { syncTimeoutMs: 1000 });
    const started = inf.start().catch((e: unknown) => e);
    for (let t = 0; t < 1000; t += 50) {
      clock.advance(50);
      await flushAsync();
    }
    const err = (await started) as Error;
    expect(err.message).toBe('Informer test did not sync within 1000 ms');
    expect((err.cause as Error).message).toContain('ECONNREFUSED');
    const asked = api.asked.length;
    clock.advance(5000);
    await flushAsync();
    expect(api.asked.length).toBeGreaterThan(asked);
    await inf.stop();
    const after = api.asked.length;
    clock.advance(60_000);
    await flushAsync();
    expect(api.asked.length).toBe(after);
    await expect(inf.start()).rejects.toThrow('Informer test was stopped; create a new one');
  });

  it('stop() before the first sync rejects start() and ends the loop at once', async () => {
    const clock = new FakeClock();
    const api = new ScriptedApi();
    api.lists.push(refused);
    const { inf } = informerOn(api, clock);
    const started = inf.start().catch((e: unknown) => e);
    await flushAsync();
    await inf.stop();
    expect(((await started) as Error).message).toBe('Informer test was stopped before it synced');
    expect(clock.pendingTimers()).toBe(0);
  });
});
