/**
 * Writes to one custom resource type: a JSON merge patch of its status subresource and a JSON Patch
 * of the object (for guarded finalizer edits), over the {@link JsonClient}, with every content type
 * and abort signal explicit.
 */
import type { JsonPatchOperation } from '../runtime/finalizer.ts';
import type { JsonClient } from './json-client.ts';

/** ResourceType names a custom resource's REST path. */
export interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** RequestOptions carry a request's abort signal. */
export interface RequestOptions {
  readonly signal?: AbortSignal;
}

/** CustomResourceWriter patches objects of one custom resource type. */
export interface CustomResourceWriter {
  /** mergePatchStatus sends `{status}` as a JSON merge patch to the status subresource. */
  mergePatchStatus(
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    options?: RequestOptions,
  ): Promise<void>;
  /**
   * jsonPatch sends `ops` as a JSON Patch to the object and resolves with the object as patched; a
   * failed `test` is a 422 from the server.
   */
  jsonPatch(
    namespace: string,
    name: string,
    ops: readonly JsonPatchOperation[],
    options?: RequestOptions,
  ): Promise<unknown>;
}

/** customResourceWriterOver makes a {@link CustomResourceWriter} for `type` over a {@link JsonClient}. */
export function customResourceWriterOver(json: JsonClient, type: ResourceType): CustomResourceWriter {
  const { group, version, plural } = type;
  const path = (namespace: string, name: string): string =>
    `/apis/${group}/${version}/namespaces/${encodeURIComponent(namespace)}/${plural}/${encodeURIComponent(name)}`;
  return {
    async mergePatchStatus(namespace, name, status, options) {
      await json.request<unknown>({
        method: 'PATCH',
        path: `${path(namespace, name)}/status`,
        body: { status },
        contentType: 'application/merge-patch+json',
        signal: options?.signal,
      });
    },
    jsonPatch: (namespace, name, ops, options) =>
      json.request<unknown>({
        method: 'PATCH',
        path: path(namespace, name),
        body: ops,
        contentType: 'application/json-patch+json',
        signal: options?.signal,
      }),
  };
}
