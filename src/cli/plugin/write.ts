/**
 * The plugin's writes: annotations on the DistributedLock (users may edit its metadata; they
 * cannot write fencepost Leases — the chart's lease-protection policy allows only the controller,
 * the agents and listed extra writers). The controller acts on the annotation and answers beside
 * it. Also who the caller is (a SelfSubjectReview), for the request's `by` and the controller's
 * Event; best effort, as the API server's audit log is the real record.
 */
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../../api/v1alpha1/distributedlock.ts';
import type { Cluster } from './read.ts';
import { failureOf, readLock } from './read.ts';

/** annotateLock merge-patches one annotation onto the lock (a value of null removes it). */
export async function annotateLock(
  c: Cluster,
  namespace: string,
  name: string,
  annotations: Readonly<Record<string, string | null>>,
): Promise<DistributedLock> {
  const path = `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${PLURAL}/${encodeURIComponent(name)}`;
  try {
    return await c.json.request<DistributedLock>({
      method: 'PATCH',
      path,
      body: { metadata: { annotations } },
      contentType: 'application/merge-patch+json',
    });
  } catch (err) {
    throw new Error(`PATCH ${path} on ${c.server}: ${failureOf(err)}`, { cause: err });
  }
}

/** whoAmI is the caller's user name as the API server sees it, or undefined when it cannot tell. */
export async function whoAmI(c: Cluster): Promise<string | undefined> {
  try {
    const r = await c.json.request<{ status?: { userInfo?: { username?: string } } }>({
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    return r.status?.userInfo?.username;
  } catch {
    return undefined; // an older API server, or RBAC: the request goes without a name
  }
}

/**
 * waitForAnswer polls the lock until `resultKey` holds an answer whose `token` is `token` and the
 * request annotation is gone, or `waitMs` passes. Resolves with the answer's JSON text, or
 * undefined on timeout.
 */
export async function waitForAnswer(
  c: Cluster,
  namespace: string,
  name: string,
  keys: { readonly request: string; readonly result: string },
  token: string,
  waitMs: number,
): Promise<string | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const lock = await readLock(c, namespace, name);
    const ann = lock.metadata.annotations ?? {};
    const result = ann[keys.result];
    if (ann[keys.request] === undefined && result !== undefined && result.includes(`"token":"${token}"`)) return result;
    if (Date.now() >= deadline) return undefined;
    await new Promise((r) => setTimeout(r, 500));
  }
}
