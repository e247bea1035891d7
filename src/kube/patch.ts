/**
 * Patch helpers for @kubernetes/client-node. Its custom-object patch calls default to JSON Patch
 * and KubernetesObjectApi.patch to strategic merge (which custom resources reject), so every
 * patch names its content type explicitly.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/** mergePatch is the per-call option that sends a body as a JSON merge patch (RFC 7386). */
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** jsonPatch is the per-call option that sends a body as a JSON Patch (RFC 6902), for `test` preconditions. */
export const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
