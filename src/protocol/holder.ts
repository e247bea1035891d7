/**
 * Holder identity: one incarnation of a holder pod. The Lease's holderIdentity is
 * `<pod name>/<pod uid>`, so a re-created pod of the same name is a different holder (a new term,
 * a new token). Pure and free of imports.
 */

/** HolderRef identifies one incarnation of a holder pod. */
export interface HolderRef {
  readonly name: string;
  readonly uid: string;
}

/** holderIdentity is the Lease's holderIdentity for a pod incarnation. */
export function holderIdentity(h: HolderRef): string {
  return `${h.name}/${h.uid}`;
}

/** parseHolderIdentity reverses holderIdentity; another spelling yields a holder with an empty uid (matches no pod). */
export function parseHolderIdentity(id: string | undefined): HolderRef | undefined {
  if (id === undefined || id === '') return undefined;
  const slash = id.indexOf('/');
  // Not our spelling (someone else wrote it): still a holder, that no pod matches — so it is held
  // until it expires, never taken over at once.
  if (slash <= 0 || slash === id.length - 1) return { name: id, uid: '' };
  return { name: id.slice(0, slash), uid: id.slice(slash + 1) };
}

/** sameHolder compares two pod incarnations. */
export function sameHolder(a: HolderRef | undefined, b: HolderRef | undefined): boolean {
  return a !== undefined && b !== undefined && a.name === b.name && a.uid === b.uid;
}

/**
 * heldByAnother: the Lease names a holder, and it is not `self`. An earlier incarnation of the
 * same pod (same name, another UID) is another holder. What `--if-held` and `ifHeld` call held.
 */
export function heldByAnother(holder: HolderRef | undefined, self: HolderRef): holder is HolderRef {
  return holder !== undefined && !sameHolder(holder, self);
}
