/**
 * What the race page's server tells the page, over Server-Sent Events: what the testbed is
 * (`hello`), then one {@link RaceEvent} per thing that happened. The page folds the events into
 * what it shows (page/model.ts); a page that connects late gets every event so far in its
 * `hello`, so all pages show the same timeline.
 *
 * Times are the server's wall clock in ms since the epoch; tokens are decimal strings (they can
 * exceed 2^53).
 */

/** RaceInfo describes the testbed the page drives. */
export interface RaceInfo {
  readonly namespace: string;
  readonly lock: string;
  /** key: the Redis key the workers write (the "ledger"). */
  readonly key: string;
  readonly redisUrl: string;
  readonly leaseSeconds: number;
  /** pauseSeconds: the freeze the page proposes (the --pause flag). */
  readonly pauseSeconds: number;
  readonly pods: readonly string[];
}

/** Hello is the first message of every stream: the testbed, the server's clock, and the events so far. */
export interface Hello {
  readonly now: number;
  readonly info: RaceInfo;
  readonly events: readonly RaceEvent[];
}

/** RaceEvent is one thing that happened on the testbed, or a change of the page's settings. */
export type RaceEvent =
  /** round: both workers were (re)started, writing through the guard or with a plain SET. */
  | { readonly type: 'round'; readonly at: number; readonly guard: boolean }
  /** guard: the guard setting changed (a running round restarts with it; otherwise the next round uses it). */
  | { readonly type: 'guard'; readonly at: number; readonly on: boolean }
  /** grant: the controller gave the lock to pod with a new token (previous: the pod that had it). */
  | {
      readonly type: 'grant';
      readonly at: number;
      readonly pod: string;
      readonly token: string;
      readonly previous?: string;
    }
  /** lease: the holder's agent renewed; the lease runs out at expiresAt unless renewed again. */
  | {
      readonly type: 'lease';
      readonly at: number;
      readonly pod: string;
      readonly token: string;
      readonly expiresAt: number;
    }
  /** expired: the holder's lease ran out without a renewal (the controller will grant it anew). */
  | { readonly type: 'expired'; readonly at: number; readonly pod: string; readonly token: string }
  /** agent: what a worker's agent answers changed (held, waiting, lost, …). */
  | {
      readonly type: 'agent';
      readonly at: number;
      readonly pod: string;
      readonly state: string;
      readonly held: boolean;
      readonly token?: string;
    }
  /** wrote: the first accepted write of pod under token (it keeps writing every 200 ms). */
  | { readonly type: 'wrote'; readonly at: number; readonly pod: string; readonly token: string }
  /** frozen: SIGSTOP to pod's worker and agent, right after the worker checked it holds token. */
  | {
      readonly type: 'frozen';
      readonly at: number;
      readonly pod: string;
      readonly token: string;
      readonly seconds: number;
    }
  /** thawed: SIGCONT after afterSeconds. */
  | { readonly type: 'thawed'; readonly at: number; readonly pod: string; readonly afterSeconds: number }
  /** refused: the guard refused a write with a token below its mark. */
  | {
      readonly type: 'refused';
      readonly at: number;
      readonly pod: string;
      readonly token: string;
      readonly highWater: string;
    }
  /** overwrote: a plain SET with a stale token went through, replacing previous. */
  | {
      readonly type: 'overwrote';
      readonly at: number;
      readonly pod: string;
      readonly token: string;
      readonly previous: string | null;
    }
  /** ledger: the Redis key's value changed (as the workers' writes report it). */
  | { readonly type: 'ledger'; readonly at: number; readonly value: string | null }
  /** failed: something the page asked for, or a worker's write, failed. */
  | { readonly type: 'failed'; readonly at: number; readonly message: string };

/** RaceEventType is the `type` of a {@link RaceEvent}. */
export type RaceEventType = RaceEvent['type'];
