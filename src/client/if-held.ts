/**
 * What acquire() does when another pod holds the lock (`fencepost exec --if-held`). The decision
 * is protocol/holder.ts's heldByAnother (LockSession.otherHolder); when the Lease is looked at and
 * withdrawing a request made meanwhile are acquire.ts's.
 *
 * "Held" is what the lock's Lease says: it names a holder. That is who the server granted the
 * lock to — in Election mode the elected pod, in Mutex mode the pod whose turn it is — whether or
 * not it is still renewing: a holder that died stays named until the controller expires it, and
 * the lock is held until then (nobody else can be granted it either).
 */
/**
 * IfHeld: `wait` asks for the lock and waits (Mutex: joins the queue), as acquire() always did;
 * `fail` gives up at once (LockHeldError) when the lock is held by another pod when asked, or is
 * granted to another pod while this one waits for its grant.
 */
export type IfHeld = 'wait' | 'fail';
