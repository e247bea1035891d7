/**
 * The pod identity acquire() runs as: the options, else the downward API's environment variables.
 * Read once per acquire, before anything connects, so that a missing variable is what is named.
 */
import type { HolderRef } from '../protocol/holder.ts';

/** PodIdentity: the lock's namespace and this pod incarnation. */
export interface PodIdentity {
  readonly namespace: string;
  readonly self: HolderRef;
}

/**
 * podIdentity: options.namespace else $POD_NAMESPACE, options.pod else $POD_NAME and $POD_UID.
 * Throws naming the first variable that is missing or empty, and the option that replaces it.
 */
export function podIdentity(opts: { readonly namespace?: string; readonly pod?: HolderRef }): PodIdentity {
  const namespace = opts.namespace ?? env('POD_NAMESPACE');
  const self = opts.pod ?? { name: env('POD_NAME'), uid: env('POD_UID') };
  return { namespace, self };
}

function env(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === '')
    throw new Error(
      `acquire: ${name} is not set; pass options.${name === 'POD_NAMESPACE' ? 'namespace' : 'pod'} or set it from the downward API`,
    );
  return v;
}
