/**
 * Where acquire() finds the lock stores (stores/open.ts) when it is given a `store`: a loader the
 * entry point provides, so that an executable that must not carry a Redis client can leave them
 * out. The library entry (src/index.ts) and the Node CLI (src/cli/main.ts) provide one, a lazy
 * `import()`: ioredis is loaded only by an acquire() that names a store. The compiled
 * `fencepost-agent` (src/cli/agent-main.ts) provides the same stores on Bun's built-in Redis
 * client (stores/bun/open.ts) — Bun bundles every literal import() it can see, and the sidecar
 * bundles no Redis library (test/unit/cli/agent-bundle.test.ts). An entry that provides none
 * refuses a store with a message that says where it works.
 */
import type * as Stores from '../stores/open.ts';

/** StoresModule is stores/open.ts's exports. */
export type StoresModule = typeof Stores;

let loader: (() => Promise<StoresModule>) | undefined;
let loaded: Promise<StoresModule> | undefined;

/** provideStores sets the loader (the first one given wins; entry points call it once, at start). */
export function provideStores(load: () => Promise<StoresModule>): void {
  loader ??= load;
}

/** storesAvailable: a loader was provided. */
export function storesAvailable(): boolean {
  return loader !== undefined;
}

/** NO_STORES: why a store was refused, and where it works. */
export const NO_STORES =
  'this executable has no lock stores; use `fencepost exec`, `fencepost-agent exec` or the fencepost library';

/** loadStores loads the stores, or throws naming `what` (the option) when none were provided. */
export async function loadStores(what: string): Promise<StoresModule> {
  if (loader === undefined) throw new Error(`${what}: ${NO_STORES}`);
  // Loaded once: an import() per acquire costs a module resolution each time (measured: about a
  // third of an uncontended acquire+release in bench/redis-locks.ts).
  loaded ??= loader();
  return loaded;
}
