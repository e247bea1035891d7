/**
 * The one global order in which a set of locks is acquired (client/lock-set.ts), pure.
 *
 * Why an order at all: two pods that take overlapping sets in their own orders can deadlock —
 * pod P holds `a` and waits for `b` while pod Q holds `b` and waits for `a`, and in Mutex mode
 * neither ever releases (each waits, FIFO, behind the other). If every acquirer takes its locks in
 * the same total order, the holder of the highest-ordered contested lock never waits for a lock
 * someone else holds, so some acquirer always makes progress (the classic resource-ordering
 * argument). The order must be the same in every process that might share a lock, whatever order
 * the locks were named in, on every machine: so it is by namespace, then name, compared by UTF-16
 * code units, never by locale (localeCompare can differ between two pods' locales and runtimes).
 */

/** LockRef names one lock: its namespace and name. */
export interface LockRef {
  readonly namespace: string;
  readonly name: string;
}

/** compareLocks orders two locks by namespace, then name, by code units (see the module comment). */
export function compareLocks(a: LockRef, b: LockRef): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  return 0;
}

/** lockOrder returns the locks in acquisition order (a new array; the input is left as it was). */
export function lockOrder<T extends LockRef>(locks: readonly T[]): T[] {
  return [...locks].sort(compareLocks);
}

/** firstDuplicate returns the first lock named twice in `names`, or undefined. */
export function firstDuplicate(names: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) return n;
    seen.add(n);
  }
  return undefined;
}
