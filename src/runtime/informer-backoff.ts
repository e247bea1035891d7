/**
 * What both informers share about failing and waiting: the restart delays after a failed list or
 * watch and the bound on the first sync. runtime/informer.ts (the controller's, over client-node)
 * and transport/informer.ts (the agent's, over its own transport) take them from here; this module
 * imports nothing, so the agent's bundle gets the numbers without client-node.
 */

/** InformerBackoff shapes an informer's restart delays. */
export interface InformerBackoff {
  /** baseMs is the upper bound of the first restart delay. Defaults to 200 ms. */
  readonly baseMs?: number;
  /** maxMs caps every restart delay. Defaults to 30 s. */
  readonly maxMs?: number;
}

/**
 * DEFAULT_INFORMER_BACKOFF: restart delays start at ≤ 200 ms and double per consecutive failure up
 * to 30 s. 200 ms lets a blip (one API server replica restarting behind a load balancer) heal
 * almost unnoticed; the 30 s cap is client-go's reflector cap and client-node's own re-watch cap,
 * and keeps a long outage to two attempts a minute per informer. The cap is reached after 8
 * consecutive failures.
 */
export const DEFAULT_INFORMER_BACKOFF = Object.freeze({ baseMs: 200, maxMs: 30_000 } as const);

/**
 * DEFAULT_SYNC_TIMEOUT_MS is how long `start()` waits for the first list: 2 minutes, as
 * controller-runtime's `CacheSyncTimeout`: a controller whose caches never sync should exit and be restarted.
 */
export const DEFAULT_SYNC_TIMEOUT_MS = 120_000;

/**
 * restartDelays checks `backoff` and returns the delay before the restart after the n-th
 * consecutive failure (n from 0): `min(maxMs, baseMs · 2^n) · (0.5 + 0.5 · random())` — equal
 * jitter, half fixed and half random, never above maxMs.
 *
 * @throws RangeError naming `who` unless 0 < baseMs ≤ maxMs, both finite.
 */
export function restartDelays(
  who: string,
  backoff: InformerBackoff | undefined,
  random: () => number,
): (failures: number) => number {
  const baseMs = backoff?.baseMs ?? DEFAULT_INFORMER_BACKOFF.baseMs;
  const maxMs = backoff?.maxMs ?? DEFAULT_INFORMER_BACKOFF.maxMs;
  if (!(Number.isFinite(baseMs) && Number.isFinite(maxMs) && baseMs > 0 && baseMs <= maxMs))
    throw new RangeError(`${who} needs 0 < backoff.baseMs ≤ backoff.maxMs, got ${baseMs} and ${maxMs}`);
  return (failures) => Math.min(maxMs, baseMs * 2 ** failures) * (0.5 + 0.5 * random());
}

/**
 * syncTimeout returns `ms`, or {@link DEFAULT_SYNC_TIMEOUT_MS} when it is undefined.
 *
 * @throws RangeError naming `who` unless it is > 0.
 */
export function syncTimeout(who: string, ms: number | undefined): number {
  const timeoutMs = ms ?? DEFAULT_SYNC_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new RangeError(`${who} needs syncTimeoutMs > 0, got ${timeoutMs}`);
  return timeoutMs;
}
