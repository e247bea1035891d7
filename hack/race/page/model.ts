/**
 * The race page's pure part: it folds the server's events into what the page shows now (the
 * workers, the lease, the ledger, a freeze) and the timeline's sentences. Runs in the browser and
 * under Node in the unit tests; no DOM, no clock (times come with the events).
 */
import type { RaceEvent } from '../events.ts';

/** PodStatus is what a worker's card says. */
export type PodStatus = 'idle' | 'waiting' | 'holding' | 'frozen' | 'stepped-down';

/** PodView is one worker's card. */
export interface PodView {
  readonly status: PodStatus;
  /** token: the token its agent last said it holds. */
  readonly token: string | undefined;
  /** agentState: the agent's last answer (held, waiting, lost, …). */
  readonly agentState: string | undefined;
  /** stale: the outcome of its last stale write, if it made one. */
  readonly stale: 'refused' | 'overwrote' | undefined;
}

/** RaceView is the page's state. */
export interface RaceView {
  readonly guard: boolean;
  /** round: whether workers run, and with which guard setting. */
  readonly round: { readonly guard: boolean } | undefined;
  readonly holder: { readonly pod: string; readonly token: string } | undefined;
  readonly lease: { readonly pod: string; readonly token: string; readonly expiresAt: number } | undefined;
  readonly frozen: { readonly pod: string; readonly token: string; readonly until: number } | undefined;
  readonly ledger: string | null | undefined;
  readonly pods: Readonly<Record<string, PodView>>;
  /** startedAt: the first event's time, the timeline's zero. */
  readonly startedAt: number | undefined;
}

/** Tone colours a timeline entry: grant, freeze, good (the guard held), bad (corruption), plain. */
export type Tone = 'plain' | 'grant' | 'freeze' | 'good' | 'bad';

/** Entry is one line of the timeline. */
export interface Entry {
  readonly at: number;
  readonly tone: Tone;
  readonly pod: string | undefined;
  readonly text: string;
  /** important entries are also announced to screen readers. */
  readonly important: boolean;
}

const IDLE: PodView = { status: 'idle', token: undefined, agentState: undefined, stale: undefined };

/** initialView: nothing has happened yet. */
export function initialView(pods: readonly string[]): RaceView {
  return {
    guard: true,
    round: undefined,
    holder: undefined,
    lease: undefined,
    frozen: undefined,
    ledger: undefined,
    pods: Object.fromEntries(pods.map((p) => [p, IDLE])),
    startedAt: undefined,
  };
}

function withPod(v: RaceView, pod: string, change: Partial<PodView>): RaceView {
  return { ...v, pods: { ...v.pods, [pod]: { ...(v.pods[pod] ?? IDLE), ...change } } };
}

/** step applies one event: the new view, and the timeline entry it adds (if any). */
export function step(v0: RaceView, e: RaceEvent): { view: RaceView; entry: Entry | undefined } {
  const v: RaceView = v0.startedAt === undefined ? { ...v0, startedAt: e.at } : v0;
  const entry = (tone: Tone, text: string, pod?: string, important = false): Entry => ({
    at: e.at,
    tone,
    pod,
    text,
    important,
  });
  switch (e.type) {
    case 'guard':
      return { view: { ...v, guard: e.on }, entry: entry('plain', `Fencing guard ${e.on ? 'on' : 'off'}.`) };
    case 'round': {
      const pods = Object.fromEntries(Object.keys(v.pods).map((p) => [p, { ...IDLE, status: 'waiting' as const }]));
      const how = e.guard
        ? 'through the Redis fencing guard, which refuses a token below the highest it has accepted'
        : 'with a plain SET: no guard';
      return {
        view: { ...v, guard: e.guard, round: { guard: e.guard }, frozen: undefined, pods },
        entry: entry(
          'plain',
          `Race started: both workers ask their agents every 200 ms and, while theirs says "held", write to the ledger ${how}.`,
          undefined,
          true,
        ),
      };
    }
    case 'grant': {
      const before = v.holder;
      const text =
        before !== undefined && before.pod !== e.pod
          ? `The controller granted the lock to ${e.pod} with fencing token ${e.token}, larger than ${before.pod}'s ${before.token}.`
          : `The controller granted the lock to ${e.pod}: fencing token ${e.token}.`;
      return { view: { ...v, holder: { pod: e.pod, token: e.token } }, entry: entry('grant', text, e.pod, true) };
    }
    case 'lease':
      return { view: { ...v, lease: { pod: e.pod, token: e.token, expiresAt: e.expiresAt } }, entry: undefined };
    case 'expired': {
      const why = v.frozen?.pod === e.pod ? ' (its agent is frozen)' : '';
      return {
        view: v,
        entry: entry('freeze', `${e.pod}'s lease ran out: no renewal for its duration${why}.`, e.pod, true),
      };
    }
    case 'agent': {
      const was = v.pods[e.pod] ?? IDLE;
      const frozen = v.frozen?.pod === e.pod;
      const status: PodStatus = frozen
        ? 'frozen'
        : e.held
          ? 'holding'
          : was.status === 'holding' || was.status === 'frozen' || was.status === 'stepped-down'
            ? e.state === 'unreachable'
              ? was.status
              : 'stepped-down'
            : 'waiting';
      const view = withPod(v, e.pod, { status, agentState: e.state, token: e.held ? e.token : was.token });
      const stepDown = status === 'stepped-down' && was.status !== 'stepped-down';
      return {
        view,
        entry: stepDown
          ? entry('plain', `${e.pod}'s agent now says "${e.state}": ${e.pod} stops writing.`, e.pod)
          : undefined,
      };
    }
    case 'wrote':
      return {
        view: withPod(v, e.pod, { status: v.frozen?.pod === e.pod ? 'frozen' : 'holding', token: e.token }),
        entry: entry(
          'plain',
          `${e.pod} writes the ledger with token ${e.token}: accepted (and again every 200 ms).`,
          e.pod,
        ),
      };
    case 'frozen':
      return {
        view: withPod({ ...v, frozen: { pod: e.pod, token: e.token, until: e.at + e.seconds * 1000 } }, e.pod, {
          status: 'frozen',
        }),
        entry: entry(
          'freeze',
          `SIGSTOP ${e.pod}'s worker and agent, just after its agent said "held, token ${e.token}" and before its write: frozen for ${e.seconds} s.`,
          e.pod,
          true,
        ),
      };
    case 'thawed': {
      const token = v.frozen?.token ?? '?';
      return {
        view: withPod({ ...v, frozen: undefined }, e.pod, { status: 'holding' }),
        entry: entry(
          'freeze',
          `SIGCONT ${e.pod} after ${e.afterSeconds.toFixed(1)} s: it still believes it holds token ${token} and finishes its write.`,
          e.pod,
          true,
        ),
      };
    }
    case 'refused':
      return {
        view: withPod(v, e.pod, { stale: 'refused' }),
        entry: entry(
          'good',
          `${e.pod}'s write with token ${e.token}: REFUSED by the Redis guard (stale token ${e.token} < ${e.highWater}). The ledger keeps the newer holder's write.`,
          e.pod,
          true,
        ),
      };
    case 'overwrote':
      return {
        view: withPod(v, e.pod, { stale: 'overwrote' }),
        entry: entry(
          'bad',
          `${e.pod}'s write with token ${e.token}: ACCEPTED. A plain SET cannot tell it is stale: it overwrote ${quote(e.previous)}, and nothing reported an error.`,
          e.pod,
          true,
        ),
      };
    case 'ledger':
      return { view: { ...v, ledger: e.value }, entry: undefined };
    case 'failed':
      return { view: v, entry: entry('bad', `Failed: ${e.message}`, undefined, true) };
  }
}

/** quote shows a ledger value: `"…"`, or `(empty)`. */
export function quote(v: string | null | undefined): string {
  return v === null || v === undefined ? '(empty)' : `"${v}"`;
}

/** secondsText: `12.3 s` since the timeline's zero. */
export function secondsText(at: number, zero: number | undefined): string {
  return `${((at - (zero ?? at)) / 1000).toFixed(1)} s`;
}

/** leaseText: what the lease card says at `now` (server clock). */
export function leaseText(v: RaceView, now: number): string {
  if (v.lease === undefined) return 'No lease yet.';
  const left = v.lease.expiresAt - now;
  return left > 0
    ? `${v.lease.pod} holds it with token ${v.lease.token}; runs out in ${(left / 1000).toFixed(1)} s unless renewed.`
    : `${v.lease.pod}'s lease (token ${v.lease.token}) ran out ${((now - v.lease.expiresAt) / 1000).toFixed(1)} s ago.`;
}

/** podText: a worker card's status line. */
export function podText(p: PodView, frozenUntil: number | undefined, now: number): string {
  switch (p.status) {
    case 'idle':
      return 'Not started: press Race.';
    case 'waiting':
      return p.agentState !== undefined ? `Waiting (agent: ${p.agentState}).` : 'Starting…';
    case 'holding':
      return `Holds the lock: writes with token ${p.token ?? '?'}.`;
    case 'frozen': {
      const left = frozenUntil !== undefined ? Math.max(0, (frozenUntil - now) / 1000) : 0;
      return `FROZEN (SIGSTOP), believing in token ${p.token ?? '?'}: wakes in ${left.toFixed(1)} s.`;
    }
    case 'stepped-down':
      return `Stepped down (agent: ${p.agentState ?? '?'}); waits for the lock.`;
  }
}

/** canFreeze: a round runs, nobody is frozen, and the holder's worker has been told it holds the lock. */
export function canFreeze(v: RaceView): boolean {
  if (v.round === undefined || v.frozen !== undefined || v.holder === undefined) return false;
  return v.pods[v.holder.pod]?.status === 'holding';
}
