/**
 * withTimeout: a promise bounded in time, on the real clock, for the Redis clients of the lock
 * stores (stores/bun/client.ts, stores/observe.ts) whose commands carry no timeout of their own.
 */

/** withTimeout settles as `p` does, or rejects `what: no answer within ms ms` if `p` takes longer; the timer never outlives it. */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`${what}: no answer within ${ms} ms`));
      }, ms);
    }),
  ]).finally(() => {
    clearTimeout(timer);
  });
}
