import { describe, expect, it } from 'vitest';
import { isDeepStrictEqual } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  addFinalizerPatch,
  jsonPatchFinalizerIO,
  removeFinalizerPatch,
  withFinalizer,
} from '../../../src/runtime/finalizer.ts';
import type {
  FinalizerHandlers,
  FinalizerIO,
  JsonPatchOperation,
  ReconcileResult,
} from '../../../src/runtime/finalizer.ts';

const FINALIZER = 'fencepost.io/lease-cleanup';
const OTHER = 'example.com/other';

type Obj = KubernetesObject;

/** deepFreeze makes a fixture immutable all the way down, so any mutation throws: cached objects must never be mutated. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** anObject builds a frozen object the way the API server returns it, with functional options. */
function anObject(...options: ((o: Obj) => void)[]): Obj {
  const o: Obj = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'x', namespace: 'ns', resourceVersion: '42' },
  };
  for (const opt of options) opt(o);
  return deepFreeze(o);
}
const withFinalizers =
  (...names: string[]) =>
  (o: Obj): void => {
    o.metadata = { ...o.metadata, finalizers: names };
  };
const deleting =
  () =>
  (o: Obj): void => {
    o.metadata = { ...o.metadata, deletionTimestamp: new Date('2025-01-01T00:00:00Z') };
  };
const withoutResourceVersion =
  () =>
  (o: Obj): void => {
    const { resourceVersion: _rv, ...rest } = o.metadata ?? {};
    o.metadata = rest;
  };

type Call = 'add' | 'remove' | 'apply' | 'cleanup';

/** fakeWorld records every IO and handler call in order, and can make any of them fail. */
function fakeWorld(fail: Partial<Record<Call, Error>> = {}): {
  calls: Call[];
  io: FinalizerIO;
  handlers: FinalizerHandlers<Obj>;
} {
  const calls: Call[] = [];
  const step =
    (call: Call, result: ReconcileResult = {}) =>
    (): Promise<ReconcileResult> => {
      calls.push(call);
      const err = fail[call];
      return err === undefined ? Promise.resolve(result) : Promise.reject(err);
    };
  const add = step('add');
  const remove = step('remove');
  return {
    calls,
    io: {
      addFinalizer: async () => {
        await add();
      },
      removeFinalizer: async () => {
        await remove();
      },
    },
    handlers: { apply: step('apply', { requeueAfterMs: 1000 }), cleanup: step('cleanup', { requeueAfterMs: 2000 }) },
  };
}

describe('withFinalizer', () => {
  const cells: { name: string; obj: Obj; calls: Call[]; result: ReconcileResult }[] = [
    {
      name: 'a live object without the finalizer gets it added, then apply runs in the same call',
      obj: anObject(),
      calls: ['add', 'apply'],
      result: { requeueAfterMs: 1000 },
    },
    {
      name: 'a live object with only someone else’s finalizer gets ours added, then apply runs',
      obj: anObject(withFinalizers(OTHER)),
      calls: ['add', 'apply'],
      result: { requeueAfterMs: 1000 },
    },
    {
      name: 'a deleting object without the finalizer is left alone',
      obj: anObject(deleting()),
      calls: [],
      result: {},
    },
    {
      name: 'a deleting object with only someone else’s finalizer is left alone',
      obj: anObject(withFinalizers(OTHER), deleting()),
      calls: [],
      result: {},
    },
    {
      name: 'a live object with the finalizer is applied, and apply’s result is returned',
      obj: anObject(withFinalizers(OTHER, FINALIZER)),
      calls: ['apply'],
      result: { requeueAfterMs: 1000 },
    },
    {
      name: 'a deleting object with the finalizer is cleaned up, then the finalizer removed, returning cleanup’s result',
      obj: anObject(withFinalizers(FINALIZER, OTHER), deleting()),
      calls: ['cleanup', 'remove'],
      result: { requeueAfterMs: 2000 },
    },
  ];
  it.each(cells)('$name', async ({ obj, calls, result }) => {
    const world = fakeWorld();
    await expect(withFinalizer(obj, FINALIZER, world.io, world.handlers)).resolves.toEqual(result);
    expect(world.calls).toEqual(calls);
  });

  const failures: { name: string; obj: Obj; fail: Call; calls: Call[] }[] = [
    {
      name: 'a cleanup that throws keeps the finalizer and propagates the error',
      obj: anObject(withFinalizers(FINALIZER), deleting()),
      fail: 'cleanup',
      calls: ['cleanup'],
    },
    {
      name: 'a failed finalizer removal propagates, so cleanup runs again next time',
      obj: anObject(withFinalizers(FINALIZER), deleting()),
      fail: 'remove',
      calls: ['cleanup', 'remove'],
    },
    {
      name: 'a failed finalizer add propagates and apply does not run',
      obj: anObject(),
      fail: 'add',
      calls: ['add'],
    },
    {
      name: 'an apply that throws propagates and touches no finalizer',
      obj: anObject(withFinalizers(FINALIZER)),
      fail: 'apply',
      calls: ['apply'],
    },
  ];
  it.each(failures)('$name', async ({ obj, fail, calls }) => {
    const boom = new Error(`${fail} failed`);
    const world = fakeWorld({ [fail]: boom });
    await expect(withFinalizer(obj, FINALIZER, world.io, world.handlers)).rejects.toBe(boom);
    expect(world.calls).toEqual(calls);
  });

  it('treats a null deletionTimestamp (as some clients send it) as not deleting', async () => {
    const obj = deepFreeze({
      metadata: { name: 'x', finalizers: [FINALIZER], deletionTimestamp: null },
    }) as unknown as Obj;
    const world = fakeWorld();
    await withFinalizer(obj, FINALIZER, world.io, world.handlers);
    expect(world.calls).toEqual(['apply']);
  });
});

/**
 * applyJsonPatch applies the RFC 6902 operations the finalizer patches use to a copy of `doc`,
 * throwing on a failed `test` as the API server does (there with HTTP 422). Only for checking what
 * the patches mean; the real server's behaviour is covered by the integration tests that use them.
 */
function applyJsonPatch(doc: Obj, ops: readonly JsonPatchOperation[]): Obj {
  const out: unknown = structuredClone(doc);
  for (const op of ops) {
    const segments = op.path.split('/').slice(1);
    const last = segments.pop() ?? '';
    let parent: unknown = out;
    for (const s of segments) parent = isRecord(parent) ? parent[s] : undefined;
    if (Array.isArray(parent)) {
      const list: unknown[] = parent;
      const i = last === '-' ? list.length : Number(last);
      if (op.op === 'add') list.splice(i, 0, structuredClone(op.value));
      else if (!(i < list.length)) throw new Error(`${op.op} ${op.path}: no such member`);
      else if (op.op === 'remove') list.splice(i, 1);
      else if (!isDeepStrictEqual(list[i], op.value)) throw new Error(`test ${op.path} failed`);
    } else if (isRecord(parent)) {
      if (op.op === 'add') parent[last] = structuredClone(op.value);
      else if (!(last in parent)) throw new Error(`${op.op} ${op.path}: no such member`);
      else if (op.op === 'remove') delete parent[last];
      else if (!isDeepStrictEqual(parent[last], op.value)) throw new Error(`test ${op.path} failed`);
    } else {
      throw new Error(`${op.op} ${op.path}: parent does not exist`);
    }
  }
  return out as Obj;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

describe('jsonPatchFinalizerIO', () => {
  function recordingIO(): { io: FinalizerIO; patches: (readonly JsonPatchOperation[])[] } {
    const patches: (readonly JsonPatchOperation[])[] = [];
    return {
      patches,
      io: jsonPatchFinalizerIO<Obj>((_obj, ops) => {
        patches.push(ops);
        return Promise.resolve();
      }),
    };
  }

  const adds: { name: string; obj: Obj; patch: JsonPatchOperation[] }[] = [
    {
      name: 'adding to an object without finalizers is guarded by its resourceVersion',
      obj: anObject(),
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '42' },
        { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] },
      ],
    },
    {
      name: 'adding to an empty finalizer list is guarded by the resourceVersion (the server omits empty lists)',
      obj: anObject(withFinalizers()),
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '42' },
        { op: 'add', path: '/metadata/finalizers', value: [FINALIZER] },
      ],
    },
    {
      name: 'adding to an existing list is guarded by the whole list and appends',
      obj: anObject(withFinalizers(OTHER)),
      patch: [
        { op: 'test', path: '/metadata/finalizers', value: [OTHER] },
        { op: 'add', path: '/metadata/finalizers/-', value: FINALIZER },
      ],
    },
  ];
  it.each(adds)('$name', async ({ obj, patch }) => {
    const { io, patches } = recordingIO();
    await io.addFinalizer(obj, FINALIZER);
    expect(patches).toEqual([patch]);
    expect(applyJsonPatch(obj, patch).metadata?.finalizers).toEqual([...(obj.metadata?.finalizers ?? []), FINALIZER]);
  });

  const removes: { name: string; obj: Obj; patch: JsonPatchOperation[]; left: string[] }[] = [
    {
      name: 'removing tests the finalizer at its index, then removes that index',
      obj: anObject(withFinalizers(OTHER, FINALIZER)),
      patch: [
        { op: 'test', path: '/metadata/finalizers/1', value: FINALIZER },
        { op: 'remove', path: '/metadata/finalizers/1' },
      ],
      left: [OTHER],
    },
    {
      name: 'removing a duplicated finalizer removes every copy, highest index first',
      obj: anObject(withFinalizers(FINALIZER, OTHER, FINALIZER)),
      patch: [
        { op: 'test', path: '/metadata/finalizers/2', value: FINALIZER },
        { op: 'remove', path: '/metadata/finalizers/2' },
        { op: 'test', path: '/metadata/finalizers/0', value: FINALIZER },
        { op: 'remove', path: '/metadata/finalizers/0' },
      ],
      left: [OTHER],
    },
  ];
  it.each(removes)('$name', async ({ obj, patch, left }) => {
    const { io, patches } = recordingIO();
    await io.removeFinalizer(obj, FINALIZER);
    expect(patches).toEqual([patch]);
    expect(applyJsonPatch(obj, patch).metadata?.finalizers).toEqual(left);
  });

  const noops: { name: string; call: (io: FinalizerIO) => Promise<unknown> }[] = [
    {
      name: 'adding a finalizer the object already has sends nothing',
      call: (io) => io.addFinalizer(anObject(withFinalizers(FINALIZER)), FINALIZER),
    },
    {
      name: 'removing a finalizer the object lacks sends nothing',
      call: (io) => io.removeFinalizer(anObject(withFinalizers(OTHER)), FINALIZER),
    },
    {
      name: 'removing from an object without finalizers sends nothing',
      call: (io) => io.removeFinalizer(anObject(), FINALIZER),
    },
  ];
  it.each(noops)('$name', async ({ call }) => {
    const { io, patches } = recordingIO();
    await call(io);
    expect(patches).toEqual([]);
  });

  it('refuses to send an unguarded add for an object with no finalizers and no resourceVersion', async () => {
    const { io, patches } = recordingIO();
    await expect(io.addFinalizer(anObject(withoutResourceVersion()), FINALIZER)).rejects.toThrow(/resourceVersion/);
    expect(patches).toEqual([]);
  });

  it('propagates a rejected patch (a lost race) to the caller', async () => {
    const lost = new Error('HTTP 422: test failed');
    const io = jsonPatchFinalizerIO<Obj>(() => Promise.reject(lost));
    await expect(io.addFinalizer(anObject(), FINALIZER)).rejects.toBe(lost);
    await expect(io.removeFinalizer(anObject(withFinalizers(FINALIZER)), FINALIZER)).rejects.toBe(lost);
  });

  it('hands the patch function the object it was given, unchanged', async () => {
    const obj = anObject(withFinalizers(OTHER));
    const seen: Obj[] = [];
    const io = jsonPatchFinalizerIO<Obj>((o) => {
      seen.push(o);
      return Promise.resolve();
    });
    await io.addFinalizer(obj, FINALIZER);
    expect(seen).toEqual([obj]);
    expect(seen[0]).toBe(obj);
  });

  describe('guards: a patch built from a stale object fails against the current one', () => {
    const stale: { name: string; patch: JsonPatchOperation[]; current: Obj }[] = [
      {
        name: 'an add from an object without finalizers, after someone else added one',
        patch: addFinalizerPatch(anObject(), FINALIZER),
        current: anObject(withFinalizers(OTHER), (o) => {
          o.metadata = { ...o.metadata, resourceVersion: '43' };
        }),
      },
      {
        name: 'an add to a list that has changed since',
        patch: addFinalizerPatch(anObject(withFinalizers(OTHER)), FINALIZER),
        current: anObject(withFinalizers(OTHER, 'example.com/third')),
      },
      {
        name: 'a remove at an index that now holds another finalizer',
        patch: removeFinalizerPatch(anObject(withFinalizers(OTHER, FINALIZER)), FINALIZER),
        current: anObject(withFinalizers(FINALIZER, OTHER)),
      },
      {
        name: 'a remove after the list shrank below the index',
        patch: removeFinalizerPatch(anObject(withFinalizers(OTHER, FINALIZER)), FINALIZER),
        current: anObject(withFinalizers(OTHER)),
      },
    ];
    it.each(stale)('$name', ({ patch, current }) => {
      expect(patch[0]?.op).toBe('test');
      expect(() => applyJsonPatch(current, patch)).toThrow(/failed|no such member/);
    });
  });
});
