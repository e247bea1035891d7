/**
 * The controller's write path without client-node's pipeline (the API client as the
 * kube/json-client.ts port, and the adapters over it), against the real API server: the same answers, and errors that
 * runtime/errors.ts classifies as it classifies client-node's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, type V1Lease } from '@kubernetes/client-node';
import { customResourceWriterOver } from '../../../src/kube/custom-resources.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { leaseRequests } from '../../../src/transport/resources.ts';
import { podPatcherOver } from '../../../src/kube/pods.ts';
import { GROUP, PLURAL, VERSION } from '../../../src/api/v1alpha1/distributedlock.ts';
import type { RestRequest } from '../../../src/observability/metrics.ts';
import { errorKind, isAlreadyExists, isConflict, isNotFound } from '../../../src/runtime/errors.ts';
import { freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, getLock, lockBody, testKube, type TestKube } from '../../support/fixtures.ts';

describe('the API client as the JSON port, and the stores over it', () => {
  const seen: RestRequest[] = [];
  const kc = apiClientFor(sharedKubeconfigPath(), { onRequest: (r) => seen.push(r) });
  const json = kc;
  const leases = leaseRequests<V1Lease>(kc);
  let t: TestKube;
  beforeAll(async () => {
    t = testKube(sharedKubeConfig(), await freshNamespace(sharedKubeConfig(), 'json-'));
  });
  afterAll(() => undefined);

  const caught = async (p: Promise<unknown>): Promise<unknown> => {
    try {
      await p;
    } catch (err) {
      return err;
    }
    throw new Error('expected a rejection');
  };

  it('creates, reads, compare-and-swaps and deletes a Lease; 409s and 404s classify as before', async () => {
    const body: V1Lease = { metadata: { name: 'j' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 5 } };
    const created = await leases.create(t.namespace, body);
    expect(created.metadata?.resourceVersion).toMatch(/^\d+$/);
    const exists = await caught(leases.create(t.namespace, body));
    expect(isAlreadyExists(exists)).toBe(true);
    expect(String(exists)).toMatch(/409/);

    const read = await leases.get(t.namespace, 'j');
    expect(read?.spec?.holderIdentity).toBe('a');
    const replaced = await leases.replace(t.namespace, 'j', {
      ...created,
      spec: { ...created.spec, holderIdentity: 'b' },
    });
    expect(replaced.spec?.holderIdentity).toBe('b');
    const stale = await caught(leases.replace(t.namespace, 'j', { ...created, spec: { holderIdentity: 'c' } }));
    expect(isConflict(stale)).toBe(true);
    expect(errorKind(stale)).toBe(errorKind(stale)); // classified without throwing

    // A delete with a resourceVersion precondition deletes only that version.
    const staleDelete = await caught(
      leases.delete(t.namespace, 'j', { resourceVersion: created.metadata?.resourceVersion ?? '' }),
    );
    expect(isConflict(staleDelete)).toBe(true);
    expect(await leases.get(t.namespace, 'j')).toBeDefined();
    await leases.delete(t.namespace, 'j', { resourceVersion: replaced.metadata?.resourceVersion ?? '' });
    expect(await leases.get(t.namespace, 'j')).toBeUndefined();
    await leases.delete(t.namespace, 'j'); // already gone is fine
    expect(
      isNotFound(await caught(json.request({ method: 'GET', path: `/api/v1/namespaces/${t.namespace}/pods/none` }))),
    ).toBe(true);
  });

  it('patches pod metadata only for the incarnation named by uid, and lock status and finalizers', async () => {
    const pod = await createPod(t, 'p', { app: 'x' });
    const pods = podPatcherOver(json);
    await pods.patchMetadata(t.namespace, { name: 'p', uid: pod.metadata?.uid ?? '' }, { labels: { marked: 'yes' } });
    const core = t.kc.makeApiClient(CoreV1Api);
    expect((await core.readNamespacedPod({ name: 'p', namespace: t.namespace })).metadata?.labels).toMatchObject({
      marked: 'yes',
    });
    const wrongUid = await caught(pods.patchMetadata(t.namespace, { name: 'p', uid: 'other' }, { labels: { x: 'y' } }));
    // The API server refuses a merge patch whose metadata.uid names another incarnation with 422
    // Invalid ("field is immutable"), as it does for client-node's identical request.
    expect(String(wrongUid)).toMatch(/HTTP 422[\s\S]*metadata\.uid/);

    await createLock(t, lockBody('l', 'x'));
    const writer = customResourceWriterOver(json, { group: GROUP, version: VERSION, plural: PLURAL });
    await writer.mergePatchStatus(t.namespace, 'l', { candidates: 3 });
    const lock = await getLock(t, 'l');
    expect(lock.status?.candidates).toBe(3);
    const patched = (await writer.jsonPatch(t.namespace, 'l', [
      { op: 'test', path: '/metadata/resourceVersion', value: lock.metadata.resourceVersion ?? '' },
      { op: 'add', path: '/metadata/finalizers', value: ['example.com/f'] },
    ])) as { metadata?: { resourceVersion?: string; finalizers?: string[] } };
    expect(patched.metadata?.finalizers).toEqual(['example.com/f']);
    expect(patched.metadata?.resourceVersion).not.toBe(lock.metadata.resourceVersion);
    const failedTest = await caught(
      writer.jsonPatch(t.namespace, 'l', [{ op: 'test', path: '/metadata/resourceVersion', value: '1' }]),
    );
    expect(String(failedTest)).toMatch(/422/);
    await writer.jsonPatch(t.namespace, 'l', [{ op: 'remove', path: '/metadata/finalizers' }]);
  });

  it('goes through the pooled, counted dispatcher (rest_client_requests_total sees every call)', () => {
    expect(seen.length).toBeGreaterThan(10);
    expect(new Set(seen.map((r) => r.method))).toEqual(new Set(['POST', 'GET', 'PUT', 'DELETE', 'PATCH']));
    expect(seen.filter((r) => r.code === '409').length).toBeGreaterThanOrEqual(2);
  });
});
