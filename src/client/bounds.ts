/**
 * Bounds for the requests of HeldLock.release() and complete() (acquire.ts): one AbortSignal that
 * ends when the caller's signal aborts or a timeout on the injected clock passes, handed to every
 * request so that it is aborted on the wire, not merely no longer awaited.
 */
import type { TimerClock } from '../runtime/clock.ts';

/**
 * RequestBounds bound the requests of HeldLock.release() and complete(): each is aborted on the
 * wire when `signal` aborts or `timeoutMs` (on the acquire's clock) has passed, and the call then
 * rejects with the signal's reason (or a timeout error). Without them, a request waits as long as
 * the HTTP client does.
 */
export interface RequestBounds {
  readonly signal?: AbortSignal | undefined;
  readonly timeoutMs?: number | undefined;
}

/** RequestTimeoutError: a bounded release() or complete() gave up after its timeoutMs. */
export class RequestTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestTimeoutError';
  }
}

/**
 * bounded runs `work` with one signal that aborts when `bounds.signal` does or `bounds.timeoutMs`
 * has passed; if it aborted, the call rejects with its reason rather than the request's own error.
 */
export async function bounded(
  bounds: RequestBounds | undefined,
  clock: TimerClock,
  what: string,
  work: (signal: AbortSignal | undefined) => Promise<void>,
): Promise<void> {
  if (bounds?.signal === undefined && bounds?.timeoutMs === undefined) return await work(undefined);
  const ac = new AbortController();
  const onAbort = (): void => {
    ac.abort(bounds.signal?.reason);
  };
  if (bounds.signal?.aborted === true) onAbort();
  else bounds.signal?.addEventListener('abort', onAbort, { once: true });
  const timeoutMs = bounds.timeoutMs;
  const timer =
    timeoutMs !== undefined
      ? clock.setTimeout(
          () => {
            ac.abort(new RequestTimeoutError(`${what}: gave up after ${timeoutMs} ms`));
          },
          Math.max(0, timeoutMs),
        )
      : undefined;
  try {
    await work(ac.signal);
  } catch (err) {
    if (ac.signal.aborted) throw ac.signal.reason;
    throw err;
  } finally {
    timer?.cancel();
    bounds.signal?.removeEventListener('abort', onAbort);
  }
}

/** waitBounded waits for `p`, rejecting early (without cancelling it) when the bounds end first. */
export async function waitBounded(
  p: Promise<void>,
  bounds: RequestBounds | undefined,
  clock: TimerClock,
  what: string,
): Promise<void> {
  if (bounds?.signal === undefined && bounds?.timeoutMs === undefined) return await p;
  await bounded(
    bounds,
    clock,
    what,
    (signal) =>
      new Promise<void>((resolve, reject) => {
        // bounded() rejects with the signal's reason; this only ends the wait.
        const stop = (): void => {
          reject(new Error(`${what}: stopped waiting`));
        };
        p.then(resolve, reject);
        if (signal?.aborted === true) stop();
        signal?.addEventListener('abort', stop, { once: true });
      }),
  );
}
