/**
 * Patch content types for @kubernetes/client-node calls made without an abort signal. Its
 * custom-object patch calls default to JSON Patch and KubernetesObjectApi.patch to strategic merge
 * (which custom resources reject), so every patch names its content type explicitly.
 */
import { mergePatchWith } from './request-options.ts';

/** mergePatch is the per-call option that sends a body as a JSON merge patch (RFC 7386). */
export const mergePatch = mergePatchWith(undefined);
