/**
 * What the end-to-end tests observe of a lock while the cluster rolls, scales and deletes pods:
 * the Lease's holder and token history (polled) and what every running agent believes (its local
 * API, polled). The "never two holders" claim is checked on both.
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
  /** maxBelievers is the most agents that said held in one round of polling. */
  readonly maxBelievers: number;
  readonly rounds: number;
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

/** believers lists the pods whose running agent says it holds the lock now. */
export async function believers(e: E2e, namespace: string, lock: string): Promise<{ pod: string; token: string }[]> {
  const agents = await e.running(namespace, 'fencepost-agent');
  const snaps = await Promise.all(
    agents.map(async (pod) => ({ pod, snap: await snapshotOf(e, namespace, pod, lock) })),
  );
  return snaps.filter((s) => s.snap?.held === true).map((s) => ({ pod: s.pod, token: s.snap?.token ?? '' }));
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
  let rounds = 0;
  let stopped = false;
  const poll = async (): Promise<void> => {
    rounds++;
    const [lease, held] = await Promise.all([
      e.leases.readNamespacedLease({ namespace, name: leaseName(lock) }).catch(() => undefined),
      believers(e, namespace, lock),
    ]);
    maxBelievers = Math.max(maxBelievers, held.length);
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
      return { terms, maxBelievers, rounds };
    },
  };
}
