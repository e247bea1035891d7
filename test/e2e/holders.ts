/**
 * What the end-to-end tests observe of a lock while the cluster rolls, scales and deletes pods:
 * the Lease's holder and token history (polled) and what every running agent believes (its local
 * API, polled). The "never two holders" claim is checked on both: the Lease's terms in token order,
 * and no agent still believing an older term after a newer one was believed (provenOverlaps).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockSnapshot } from '../../src/agent/session.ts';
import { parseLease } from '../../src/lease/record.ts';
import type { E2e } from './e2e-cluster.ts';
import { leaseName } from '../../src/protocol/names.ts';

/** HolderTerm is one holder of the Lease as the poller saw it. */
export interface HolderTerm {
  readonly holder: string;
  readonly token: bigint;
}

/** HolderReport sums up a watch. */
export interface HolderReport {
  /** terms lists each distinct (holder, token) the Lease had, in order; vacancies are not listed. */
  readonly terms: readonly HolderTerm[];
  /**
   * maxBelievers is the most agents that said held in one round of polling. The agents of a round
   * are asked at once but answer at different moments, so two here (an old holder asked just
   * before it released, its successor just after its grant) does not by itself mean two at once.
   */
  readonly maxBelievers: number;
  /**
   * overlaps describes each proven moment of two holders: an agent with a smaller token said held
   * in answer to a request sent after an agent with a larger token had already said held. The old
   * term was then still believed after the new one began, whatever the answers' delays. Empty when
   * the watch proved none.
   */
  readonly overlaps: readonly string[];
  readonly rounds: number;
}

/** BeliefWindow: when a term was believed, as bounds the watch can prove from its requests. */
interface BeliefWindow {
  readonly pod: string;
  /** lastAskedMs: the latest send time of a request that got held with this token. */
  lastAskedMs: number;
  /** firstAnsweredMs: the earliest time an answer held with this token arrived. */
  firstAnsweredMs: number;
}

/**
 * provenOverlaps compares every pair of believed terms: the older one (smaller token) was still
 * believed after the newer one was, when some request for the older was sent after an answer for
 * the newer had arrived.
 */
export function provenOverlaps(windows: ReadonlyMap<bigint, BeliefWindow>): string[] {
  const tokens = [...windows.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const found: string[] = [];
  for (const [i, older] of tokens.entries())
    for (const newer of tokens.slice(i + 1)) {
      const o = windows.get(older);
      const n = windows.get(newer);
      if (o === undefined || n === undefined || o.lastAskedMs <= n.firstAnsweredMs) continue;
      found.push(
        `${o.pod} (token ${older}) said held when asked ${Math.round(o.lastAskedMs - n.firstAnsweredMs)} ms after ${n.pod} (token ${newer}) had said held`,
      );
    }
  return found;
}

/** snapshotOf asks a pod's agent for its view of the lock (undefined when it does not answer). */
export async function snapshotOf(
  e: E2e,
  namespace: string,
  pod: string,
  lock: string,
): Promise<LockSnapshot | undefined> {
  const r = await e.podGet(namespace, pod, 'fencepost-agent', 7370, `/v1/locks/${lock}`);
  if (r.status !== 200) return undefined;
  try {
    return JSON.parse(r.body) as LockSnapshot;
  } catch {
    return undefined;
  }
}

/** Belief is one agent's answer that it holds the lock, with when it was asked and answered. */
interface Belief {
  readonly pod: string;
  readonly token: string;
  readonly askedMs: number;
  readonly answeredMs: number;
}

/** timedBelievers asks every running agent at once and keeps the held answers with their times. */
async function timedBelievers(e: E2e, namespace: string, lock: string): Promise<Belief[]> {
  const agents = await e.running(namespace, 'fencepost-agent');
  const snaps = await Promise.all(
    agents.map(async (pod) => {
      const askedMs = performance.now();
      const snap = await snapshotOf(e, namespace, pod, lock);
      return { pod, snap, askedMs, answeredMs: performance.now() };
    }),
  );
  return snaps
    .filter((s) => s.snap?.held === true)
    .map((s) => ({ pod: s.pod, token: s.snap?.token ?? '', askedMs: s.askedMs, answeredMs: s.answeredMs }));
}

/** believers lists the pods whose running agent says it holds the lock now. */
export async function believers(e: E2e, namespace: string, lock: string): Promise<{ pod: string; token: string }[]> {
  return (await timedBelievers(e, namespace, lock)).map(({ pod, token }) => ({ pod, token }));
}

/** watchHolders polls the Lease and the agents every intervalMs until stop(). */
export function watchHolders(
  e: E2e,
  namespace: string,
  lock: string,
  intervalMs = 100,
): { stop(): Promise<HolderReport> } {
  const terms: HolderTerm[] = [];
  let maxBelievers = 0;
  const windows = new Map<bigint, BeliefWindow>();
  let rounds = 0;
  let stopped = false;
  const poll = async (): Promise<void> => {
    rounds++;
    const [lease, held] = await Promise.all([
      e.leases.readNamespacedLease({ namespace, name: leaseName(lock) }).catch(() => undefined),
      timedBelievers(e, namespace, lock),
    ]);
    maxBelievers = Math.max(maxBelievers, held.length);
    for (const b of held) {
      const token = BigInt(b.token);
      const w = windows.get(token);
      if (w === undefined) windows.set(token, { pod: b.pod, lastAskedMs: b.askedMs, firstAnsweredMs: b.answeredMs });
      else {
        w.lastAskedMs = Math.max(w.lastAskedMs, b.askedMs);
        w.firstAnsweredMs = Math.min(w.firstAnsweredMs, b.answeredMs);
      }
    }
    if (lease !== undefined) {
      const r = parseLease(lease);
      const last = terms.at(-1);
      if (r.holder !== undefined && r.token !== undefined && (last?.holder !== r.holder.name || last.token !== r.token))
        terms.push({ holder: r.holder.name, token: r.token });
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await poll();
      await sleep(intervalMs);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      // One more look: a term granted since the last poll (up to intervalMs ago) is in the report.
      // CI once stopped the watch right after the rollout's new holder was found, and the report's
      // last term was still the old pod's.
      await poll();
      return { terms, maxBelievers, overlaps: provenOverlaps(windows), rounds };
    },
  };
}
