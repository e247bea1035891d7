/**
 * What acquire() does when another pod holds the lock (`fencepost exec --if-held`). Whether it is
 * held is agent/held-elsewhere.ts's (the agent's `ifHeld=fail` decides the same way); when the
 * Lease is looked at and withdrawing a request made meanwhile are acquire.ts's.
 */
/**
 * IfHeld: `wait` asks for the lock and waits (Mutex: joins the queue), as acquire() always did;
 * `fail` gives up at once (LockHeldError) when the lock is held by another pod when asked, or is
 * granted to another pod while this one waits for its grant.
 */
export type IfHeld = 'wait' | 'fail';
