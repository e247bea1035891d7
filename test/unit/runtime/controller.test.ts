import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  Controller,
  type ObjectKey,
  type ReconcileContext,
  type ReconcileResult,
  type Result,
} from '../../../src/runtime/controller.ts';
import { TerminalError } from '../../../src/runtime/errors.ts';
import { WorkQueue } from '../../../src/runtime/workqueue.ts';
import { FakeClock, flushAsync } from '../../support/fake-clock.ts';

interface Line {
  readonly level: string;
  readonly obj: Record<string, unknown>;
  readonly msg: string;
}

/**
 * run reconciles one key with `outcome` (later runs succeed), and reports what the controller told its
 * hooks and logs, and whether the key was reconciled again within a minute.
 */
async function run(outcome: () => Promise<Result>): Promise<{
  results: ReconcileResult[];
  errors: [string, boolean][];
  lines: Line[];
  ctx: ReconcileContext | undefined;
  requeued: boolean;
}> {
  const clock = new FakeClock();
  const queue = new WorkQueue<ObjectKey>({ clock });
  const results: ReconcileResult[] = [];
  const errors: [string, boolean][] = [];
  const lines: Line[] = [];
  let ctx: ReconcileContext | undefined;
  let calls = 0;
  const controller = new Controller({
    name: 'widget',
    group: 'example.io',
    kind: 'Widget',
    queue,
    workers: 1,
    reconciler: {
      reconcile: (_key, c) => {
        calls++;
        if (calls > 1) return Promise.resolve({});
        ctx = c;
        return outcome();
      },
    }, // only the first run has the outcome
    log: {
      debug: (obj, msg) => {
        lines.push({ level: 'debug', obj: { ...obj }, msg });
      },
      error: (obj, msg) => {
        lines.push({ level: 'error', obj: { ...obj }, msg });
      },
    },
    hooks: {
      onReconcile: (r) => {
        results.push(r);
      },
      onError: (kind, terminal) => {
        errors.push([kind, terminal]);
      },
    },
  });
  controller.start();
  controller.enqueue('shop/w-1');
  await flushAsync();
  clock.advance(60_000); // any backoff or requeueAfter in range has fired
  await flushAsync();
  const requeued = calls > 1;
  await controller.stop();
  return { results, errors, lines, ctx, requeued };
}

const conflict = (): ApiException<string> =>
  new ApiException(409, 'Conflict', JSON.stringify({ kind: 'Status', reason: 'Conflict', code: 409 }), {});

describe("Controller outcomes in controller-runtime's names", () => {
  it.each<{
    name: string;
    outcome: () => Promise<Result>;
    result: ReconcileResult;
    errors: [string, boolean][];
    requeued: boolean;
  }>([
    {
      name: 'a reconcile with nothing scheduled is a success',
      outcome: () => Promise.resolve({}),
      result: 'success',
      errors: [],
      requeued: false,
    },
    {
      name: 'requeueAfterMs > 0 is requeue_after, and runs again after it',
      outcome: () => Promise.resolve({ requeueAfterMs: 5000 }),
      result: 'requeue_after',
      errors: [],
      requeued: true,
    },
    {
      name: 'requeueAfterMs 0 is requeue',
      outcome: () => Promise.resolve({ requeueAfterMs: 0 }),
      result: 'requeue',
      errors: [],
      requeued: true,
    },
    {
      name: 'a 409 Conflict is requeue (rate-limited), not an error',
      outcome: () => Promise.reject(conflict()),
      result: 'requeue',
      errors: [],
      requeued: true,
    },
    {
      name: 'any other error is an error, retried',
      outcome: () => Promise.reject(new Error('boom')),
      result: 'error',
      errors: [['unknown', false]],
      requeued: true,
    },
    {
      name: 'a TerminalError is an error, terminal, not retried',
      outcome: () => Promise.reject(new TerminalError('bad spec')),
      result: 'error',
      errors: [['terminal', true]],
      requeued: false,
    },
  ])('$name', async ({ outcome, result, errors, requeued }) => {
    const r = await run(outcome);
    expect(r.results[0]).toBe(result);
    expect(r.errors).toEqual(errors);
    expect(r.requeued).toBe(requeued);
  });

  it("gives the reconciler, and logs a failure with, controller-runtime's log keys", async () => {
    const r = await run(() => Promise.reject(new Error('boom')));
    const fields = {
      controller: 'widget',
      controllerGroup: 'example.io',
      controllerKind: 'Widget',
      Widget: { name: 'w-1', namespace: 'shop' },
      namespace: 'shop',
      name: 'w-1',
      reconcileID: r.ctx?.reconcileId,
    };
    expect(r.ctx?.logFields).toEqual(fields);
    expect(r.ctx?.reconcileId).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.lines[0]).toMatchObject({
      level: 'error',
      msg: 'Reconcile failed',
      obj: { ...fields, err: expect.any(Error) as unknown },
    });
  });

  it('a reconcile that fails because stop() aborted its signal is abandoned quietly: no error, no retry', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue<ObjectKey>({ clock });
    const lines: Line[] = [];
    const errors: string[] = [];
    let calls = 0;
    const controller = new Controller({
      name: 'widget',
      group: 'example.io',
      kind: 'Widget',
      queue,
      workers: 1,
      reconciler: {
        reconcile: (_key, c) => {
          calls++;
          // A request in flight: it fails the moment the reconcile's signal is aborted.
          return new Promise<Result>((_resolve, reject) => {
            c.signal.addEventListener('abort', () => {
              reject(new Error('Failed to patch Pod: controller stopping'));
            });
          });
        },
      },
      log: {
        debug: (obj, msg) => {
          lines.push({ level: 'debug', obj: { ...obj }, msg });
        },
        error: (obj, msg) => {
          lines.push({ level: 'error', obj: { ...obj }, msg });
        },
      },
      hooks: {
        onError: (kind) => {
          errors.push(kind);
        },
      },
    });
    controller.start();
    controller.enqueue('shop/w-1');
    await flushAsync();
    await controller.stop();
    expect(calls).toBe(1);
    expect(errors).toEqual([]);
    expect(lines.map((l) => `${l.level} ${l.msg}`)).toEqual(['debug Reconcile abandoned; the controller is stopping']);
  });
});
