/**
 * The pod patcher: the one pod write the lock controller makes, a JSON merge patch of labels and
 * annotations on one pod incarnation, over the {@link JsonClient}.
 */
import type { JsonClient } from './json-client.ts';

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

/** podPatcherOver makes a {@link PodPatcher} over a {@link JsonClient}. */
export function podPatcherOver(json: JsonClient): PodPatcher {
  return {
    async patchMetadata(namespace, pod, patch, options) {
      // metadata.uid in a merge patch is a precondition: the API server answers 409 when the pod
      // of that name is another incarnation, so a re-created pod is never marked by mistake.
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
