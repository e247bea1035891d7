/**
 * The pod patcher: client-node's CoreV1Api adapted to the one pod write the lock controller makes,
 * a JSON merge patch of labels and annotations on one pod incarnation.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import type { JsonClient } from './json-client.ts';
import { mergePatchWith } from './request-options.ts';

/** PodMetadataPatch is the part of a pod the lock controller writes; null deletes a key. */
export interface PodMetadataPatch {
  readonly labels?: Readonly<Record<string, string | null>>;
  readonly annotations?: Readonly<Record<string, string | null>>;
}

/** PodPatcher writes pod labels and annotations. */
export interface PodPatcher {
  /**
   * patchMetadata merges `patch` into the pod `pod` names, only if that pod is still the
   * incarnation with `pod.uid`. Rejects with the API server's 404 (pod gone) or 409 (another
   * incarnation) for the caller to classify.
   */
  patchMetadata(
    namespace: string,
    pod: { readonly name: string; readonly uid: string },
    patch: PodMetadataPatch,
    options?: { readonly signal?: AbortSignal },
  ): Promise<void>;
}

/** podPatcherFrom adapts CoreV1Api to a {@link PodPatcher}. */
export function podPatcherFrom(core: CoreV1Api): PodPatcher {
  return {
    async patchMetadata(namespace, pod, patch, options) {
      // metadata.uid in a merge patch is a precondition: the API server answers 409 when the pod
      // of that name is another incarnation, so a re-created pod is never marked by mistake.
      await core.patchNamespacedPod(
        { namespace, name: pod.name, body: { metadata: { ...patch, uid: pod.uid } } },
        mergePatchWith(options?.signal),
      );
    },
  };
}

/** podPatcherOver is {@link podPatcherFrom} over a {@link JsonClient}: the same merge patch with the uid precondition. */
export function podPatcherOver(json: JsonClient): PodPatcher {
  return {
    async patchMetadata(namespace, pod, patch, options) {
      await json.request<unknown>({
        method: 'PATCH',
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod.name)}`,
        body: { metadata: { ...patch, uid: pod.uid } },
        contentType: 'application/merge-patch+json',
        signal: options?.signal,
      });
    },
  };
}
