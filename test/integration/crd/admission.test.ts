import { beforeAll, describe, expect, it } from 'vitest';
import { CustomObjectsApi } from '@kubernetes/client-node';
import {
  API_VERSION,
  GROUP,
  KIND,
  MAX_PERMITS,
  PLURAL,
  ValidationMessage,
  VERSION,
} from '../../../src/api/v1alpha1/distributedlock.ts';
import { freshNamespace, sharedKubeConfig } from '../../support/env.ts';
import { mergePatch } from '../../support/fixtures.ts';

type Json = Record<string, unknown>;

const validSpec: Json = { leaseDurationSeconds: 15, candidates: { selector: { matchLabels: { app: 'billing' } } } };

function lock(name: string, spec: Json | undefined): Json {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name }, ...(spec !== undefined ? { spec } : {}) };
}

function withSpec(patch: Json): Json {
  return { ...validSpec, ...patch };
}

/** errorMessage pulls the API server's Status message out of a client-node ApiException. */
function errorMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string') {
    try {
      const m = (JSON.parse(body) as { message?: unknown }).message;
      return typeof m === 'string' ? m : body;
    } catch {
      return body;
    }
  }
  return err instanceof Error ? err.message : String(err);
}

// Each case: a spec the API server must refuse at admission, and the words its message must
// contain — the field's path and the constraint — so that a user can fix it without the docs.
const invalid: ReadonlyArray<{ name: string; spec: Json | undefined; expect: readonly (string | RegExp)[] }> = [
  {
    name: 'zero lease duration',
    spec: withSpec({ leaseDurationSeconds: 0 }),
    expect: ['spec.leaseDurationSeconds', 'greater than or equal to 1'],
  },
  {
    name: 'negative lease duration',
    spec: withSpec({ leaseDurationSeconds: -5 }),
    expect: ['spec.leaseDurationSeconds', 'greater than or equal to 1'],
  },
  {
    name: 'lease duration over an hour',
    spec: withSpec({ leaseDurationSeconds: 3601 }),
    expect: ['spec.leaseDurationSeconds', 'less than or equal to 3600'],
  },
  {
    name: 'lease duration as a string',
    spec: withSpec({ leaseDurationSeconds: '15s' }),
    expect: ['spec.leaseDurationSeconds', 'integer'],
  },
  {
    name: 'renew deadline equal to the lease',
    spec: withSpec({ renewDeadlineSeconds: 15 }),
    expect: [ValidationMessage.renewDeadlineNotBelowLease],
  },
  {
    name: 'renew deadline above the lease',
    spec: withSpec({ renewDeadlineSeconds: 20 }),
    expect: [ValidationMessage.renewDeadlineNotBelowLease],
  },
  {
    name: 'renew period not below the deadline',
    spec: withSpec({ renewDeadlineSeconds: 6, renewPeriodSeconds: 6 }),
    expect: [ValidationMessage.renewPeriodNotBelowDeadline],
  },
  {
    name: 'renew period not below the default deadline',
    spec: withSpec({ renewPeriodSeconds: 10 }),
    expect: [ValidationMessage.renewPeriodNotBelowDefaultDeadline],
  },
  {
    name: 'negative lock delay',
    spec: withSpec({ lockDelaySeconds: -1 }),
    expect: ['spec.lockDelaySeconds', 'greater than or equal to 0'],
  },
  {
    name: 'negative drain period',
    spec: withSpec({ handover: { drainSeconds: -1 } }),
    expect: ['spec.handover.drainSeconds', 'greater than or equal to 0'],
  },
  {
    name: 'drain period over an hour',
    spec: withSpec({ handover: { drainSeconds: 3601 } }),
    expect: ['spec.handover.drainSeconds', 'less than or equal to 3600'],
  },
  {
    name: 'drain period as a string',
    spec: withSpec({ handover: { drainSeconds: '30s' } }),
    expect: ['spec.handover.drainSeconds', 'integer'],
  },
  {
    name: 'unknown preemption',
    spec: withSpec({ preemption: 'Always' }),
    expect: ['spec.preemption', 'Unsupported value: "Always"', '"Never"', '"HigherPriority"'],
  },
  {
    name: 'unknown mode',
    spec: withSpec({ mode: 'Leader' }),
    expect: ['spec.mode', 'Unsupported value: "Leader"', '"Election"', '"Mutex"', '"Semaphore"'],
  },
  {
    name: 'a Semaphore without permits',
    spec: withSpec({ mode: 'Semaphore' }),
    expect: ['spec.permits', ValidationMessage.permitsRequired],
  },
  {
    name: 'permits on an Election lock',
    spec: withSpec({ permits: 2 }),
    expect: ['spec.permits', ValidationMessage.permitsWithoutSemaphore],
  },
  {
    name: 'permits on a Mutex lock',
    spec: withSpec({ mode: 'Mutex', permits: 2 }),
    expect: ['spec.permits', ValidationMessage.permitsWithoutSemaphore],
  },
  {
    name: 'zero permits',
    spec: withSpec({ mode: 'Semaphore', permits: 0 }),
    expect: ['spec.permits', 'greater than or equal to 1'],
  },
  {
    name: 'more permits than the maximum',
    spec: withSpec({ mode: 'Semaphore', permits: MAX_PERMITS + 1 }),
    expect: ['spec.permits', `less than or equal to ${MAX_PERMITS}`],
  },
  {
    name: 'fractional permits',
    spec: withSpec({ mode: 'Semaphore', permits: 1.5 }),
    expect: ['spec.permits', 'integer'],
  },
  {
    name: 'unknown fencing backend',
    spec: withSpec({ fencing: { backend: 'Zookeeper' } }),
    expect: ['spec.fencing.backend', 'Unsupported value: "Zookeeper"'],
  },
  {
    name: 'fencing key with the Lease backend',
    spec: withSpec({ fencing: { backend: 'Lease', key: 'my-key' } }),
    expect: [ValidationMessage.fencingKeyWithoutRedis],
  },
  { name: 'missing spec', spec: undefined, expect: ['spec', 'Required value'] },
  { name: 'missing candidates', spec: { leaseDurationSeconds: 15 }, expect: ['spec.candidates', 'Required value'] },
  {
    name: 'empty selector',
    spec: withSpec({ candidates: { selector: {} } }),
    expect: [ValidationMessage.emptySelector],
  },
  {
    name: 'unknown selector operator',
    spec: withSpec({
      candidates: { selector: { matchExpressions: [{ key: 'app', operator: 'Near', values: ['x'] }] } },
    }),
    expect: ['spec.candidates.selector.matchExpressions[0].operator', 'Unsupported value: "Near"'],
  },
  {
    name: 'In without values',
    spec: withSpec({ candidates: { selector: { matchExpressions: [{ key: 'app', operator: 'In' }] } } }),
    expect: [ValidationMessage.valuesRequired],
  },
  {
    name: 'Exists with values',
    spec: withSpec({
      candidates: { selector: { matchExpressions: [{ key: 'app', operator: 'Exists', values: ['x'] }] } },
    }),
    expect: [ValidationMessage.valuesForbidden],
  },
  {
    name: 'malformed label value in the selector',
    spec: withSpec({ candidates: { selector: { matchLabels: { app: 'not a label value!' } } } }),
    expect: ['spec.candidates.selector.matchLabels.app', 'should match'],
  },
  { name: 'an unknown store', spec: withSpec({ store: 'Etcd' }), expect: ['spec.store', 'Unsupported value: "Etcd"'] },
  {
    name: 'a Semaphore in Redis',
    spec: withSpec({ store: 'Redis', mode: 'Semaphore', permits: 2 }),
    expect: ['spec.mode', ValidationMessage.storeSemaphore],
  },
  {
    name: 'spec.fencing on a Redlock lock',
    spec: withSpec({ store: 'Redlock', fencing: { backend: 'Redis' } }),
    expect: ['spec.fencing', ValidationMessage.storeFencing],
  },
  {
    name: 'spec.lockDelaySeconds on a Redis lock',
    spec: withSpec({ store: 'Redis', lockDelaySeconds: 5 }),
    expect: ['spec.lockDelaySeconds', ValidationMessage.storeLockDelay],
  },
  {
    name: 'spec.preemption on a Redis lock',
    spec: withSpec({ store: 'Redis', preemption: 'HigherPriority' }),
    expect: ['spec.preemption', ValidationMessage.storePreemption],
  },
  {
    name: 'spec.renewDeadlineSeconds on a Redis lock',
    spec: withSpec({ store: 'Redis', renewDeadlineSeconds: 5 }),
    expect: ['spec.renewDeadlineSeconds', ValidationMessage.storeRenewTimings],
  },
];

describe('DistributedLock admission', () => {
  const kc = sharedKubeConfig();
  const api = kc.makeApiClient(CustomObjectsApi);
  let namespace = '';
  beforeAll(async () => {
    namespace = await freshNamespace(kc, 'admission-');
  });

  const create = (body: Json, fieldValidation?: string) =>
    api.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: PLURAL,
      body,
      ...(fieldValidation !== undefined ? { fieldValidation } : {}),
    });
  const get = (name: string) =>
    api.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name });

  it('accepts a valid lock and applies the schema defaults', async () => {
    const created = (await create(lock('valid', { candidates: validSpec['candidates'] }))) as { spec: Json };
    expect(created.spec['leaseDurationSeconds']).toBe(15);
    expect(created.spec['mode']).toBe('Election');
    expect(created.spec['handoff']).toEqual({ onPodTerminated: true });
    expect(created.spec['handover']).toEqual({ drainSeconds: 30 });
    expect(created.spec['preemption']).toBe('Never');
  });

  it.each(invalid.map((c, i) => ({ ...c, objectName: `bad-${i}` })))(
    'rejects $name, naming the field and the constraint, and stores nothing',
    async ({ objectName, spec, expect: words }) => {
      const err = await create(lock(objectName, spec)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, 'the API server accepted it').toBeDefined();
      expect((err as { code?: number }).code).toBe(422);
      const message = errorMessage(err);
      for (const w of words) {
        if (typeof w === 'string') expect(message).toContain(w);
        else expect(message).toMatch(w);
      }
      await expect(get(objectName)).rejects.toMatchObject({ code: 404 });
    },
  );

  it('accepts a Semaphore with its permits, and a change of permits on the live lock', async () => {
    await create(lock('semaphore', withSpec({ mode: 'Semaphore', permits: 3 })));
    const patch = (spec: Json) =>
      api.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace, plural: PLURAL, name: 'semaphore', body: { spec } },
        mergePatch,
      );
    await patch({ permits: 1 });
    await patch({ permits: MAX_PERMITS });
    expect(((await get('semaphore')) as { spec: Json }).spec['permits']).toBe(MAX_PERMITS);
  });

  it.each([
    { from: { mode: 'Semaphore', permits: 2 }, to: { mode: 'Mutex', permits: null } },
    { from: { mode: 'Election' }, to: { mode: 'Semaphore', permits: 2 } },
    { from: { mode: 'Mutex' }, to: { mode: 'Semaphore', permits: 2 } },
  ])('refuses to change spec.mode from $from.mode to $to.mode, naming the field', async ({ from, to }) => {
    const name = `mode-${from.mode.toLowerCase()}-${to.mode.toLowerCase()}`;
    await create(lock(name, withSpec(from)));
    const err = await api
      .patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace, plural: PLURAL, name, body: { spec: to } },
        mergePatch,
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((err as { code?: number }).code).toBe(422);
    expect(errorMessage(err)).toContain('spec.mode');
    expect(errorMessage(err)).toContain(ValidationMessage.semaphoreModeChange);
    expect(((await get(name)) as { spec: Json }).spec['mode']).toBe(from.mode);
  });

  it('accepts Redis and Redlock store locks in Election and Mutex mode, and refuses a change of spec.store', async () => {
    await create(lock('store-redis', withSpec({ store: 'Redis', mode: 'Mutex' })));
    await create(lock('store-redlock', withSpec({ store: 'Redlock' })));
    expect(((await get('store-redis')) as { spec: Json }).spec['store']).toBe('Redis');
    const lease = (await create(lock('store-default', validSpec))) as { spec: Json };
    expect(lease.spec['store']).toBe('Lease');
    const err = await api
      .patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace,
          plural: PLURAL,
          name: 'store-redis',
          body: { spec: { store: 'Lease' } },
        },
        mergePatch,
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((err as { code?: number }).code).toBe(422);
    expect(errorMessage(err)).toContain('spec.store');
    expect(errorMessage(err)).toContain(ValidationMessage.storeChange);
  });

  it('still allows Election to change to Mutex', async () => {
    await create(lock('election-to-mutex', validSpec));
    await api.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        name: 'election-to-mutex',
        body: { spec: { mode: 'Mutex' } },
      },
      mergePatch,
    );
    expect(((await get('election-to-mutex')) as { spec: Json }).spec['mode']).toBe('Mutex');
  });

  it('rejects a name longer than 63 characters', async () => {
    const name = 'x'.repeat(64);
    const err = await create(lock(name, validSpec)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(errorMessage(err)).toContain(ValidationMessage.nameTooLong);
    await expect(get(name)).rejects.toMatchObject({ code: 404 });
  });

  it('rejects unknown fields under strict field validation (as kubectl apply uses), naming them', async () => {
    const err = await create(lock('unknown-strict', withSpec({ leaseSeconds: 3 })), 'Strict').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code?: number }).code).toBe(400);
    expect(errorMessage(err)).toContain('unknown field "spec.leaseSeconds"');
    await expect(get('unknown-strict')).rejects.toMatchObject({ code: 404 });
  });

  it('prunes unknown fields when the client does not ask for strict validation', async () => {
    await create(lock('unknown-pruned', withSpec({ leaseSeconds: 3 })), 'Ignore');
    const stored = (await get('unknown-pruned')) as { spec: Json };
    expect(stored.spec).not.toHaveProperty('leaseSeconds');
  });

  it('refuses a malformed fencing token in status', async () => {
    await create(lock('status-token', validSpec));
    const err = await api
      .patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace,
          plural: PLURAL,
          name: 'status-token',
          body: { status: { fencingToken: '0x1f' } },
        },
        mergePatch,
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(errorMessage(err)).toContain('status.fencingToken');
  });
});
