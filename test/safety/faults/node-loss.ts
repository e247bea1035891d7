/**
 * The `node-loss` fault: the holder's node is lost while its processes go on. The holder's worker
 * is cut off from the API server (its TCP proxy blackholed: it keeps running and believing until
 * its own renew deadline, as a holder on a partitioned node does), and at a point early in its
 * remaining term kube-controller-manager's pod garbage collector acts on its pod, as it does for
 * the pods of a deleted Node or of one tainted `node.kubernetes.io/out-of-service`:
 *
 * - `mark-failed`: the pod's status is set to phase `Failed` with a `DisruptionTarget` condition
 *   (reason `DeletionByPodGC`), its container statuses left running — nobody saw them stop — and
 *   the pod stays (a finalizer keeps it, as Job pods' does);
 * - `mark-failed-and-delete`: the same mark, then the force deletion (grace 0) the pod GC makes;
 * - `delete`: the force deletion alone (the pod vanishes).
 *
 * The testbed has no nodes, kubelets or kube-controller-manager: the fault makes the pod GC's two
 * API calls itself (`pods/status` and a delete), which is all the lock controller can see of it.
 * The lock's `lockDelaySeconds` is 0 or 1 (set before the fault), so the trial also shows that the
 * delay applies to this involuntary handover.
 *
 * Counters (each must be 0): `grantedBeforeLeaseEnd` — the successor's grant (its Lease version's
 * renewTime, the controller's wall clock when it granted) came before the cut-off holder's last
 * renewal (its renewTime) plus the lease duration and the lock delay; and `grantedBeforeStepDown`,
 * as for `lease-delete`: a successor granted while the cut-off holder's last report was still a
 * grant or renewal. A term its holder released itself before the grant is not counted (a holder
 * whose renewals failed on a busy machine before the cut reports the loss and hands the term back;
 * the next grant then rightly comes at once), nor a grant before the fault; such trials are
 * labelled `(not holding)`. SAFETY_DEBUG=1 prints the history of every trial counted.
 *
 * Calibration `--calibrate phase-proof`: the bed runs phase-proof-controller.ts, the controller
 * with the old reading of a pod (phase `Failed` or `Succeeded` means every container stopped), and
 * every trial is `mark-failed` (the marked pod stays); the trials must then count early grants.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Pod } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLock } from '../../../src/api/v1alpha1/distributedlock.ts';
import { getLock, type TestKube, jsonPatch } from '../../support/fixtures.ts';
import type { ClientEvent, LeaseVersion } from '../history.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

export const NODE_LOSS_ACTIONS = ['mark-failed', 'mark-failed-and-delete', 'delete'] as const;
export type NodeLossAction = (typeof NODE_LOSS_ACTIONS)[number];

/** NODE_LOSS_LOCK_DELAYS: the lock's lockDelaySeconds in a node-loss trial. */
export const NODE_LOSS_LOCK_DELAYS = [0, 1] as const;

/** wallMs reads a Kubernetes MicroTime (RFC 3339 with up to 6 fractional digits) in milliseconds, sub-ms kept. */
export function wallMs(iso: string): number {
  const ms = Date.parse(iso);
  const frac = /\.([0-9]+)/.exec(iso)?.[1] ?? '';
  return frac.length > 3 ? ms + Number(`0.${frac.slice(3)}`) : ms;
}

/** markFailedByPodGC writes what the pod GC writes on a pod of a lost node: phase Failed, DisruptionTarget; containers untouched. */
export async function markFailedByPodGC(t: TestKube, name: string): Promise<V1Pod> {
  // The controller patches the holder pod's labels concurrently: retry the read-modify-write on 409.
  for (let attempt = 1; ; attempt++) {
    try {
      const pod = await t.core.readNamespacedPod({ name, namespace: t.namespace });
      const now = new Date();
      pod.status = {
        ...pod.status,
        phase: 'Failed',
        conditions: [
          ...(pod.status?.conditions ?? []).filter((c) => c.type !== 'DisruptionTarget'),
          {
            type: 'DisruptionTarget',
            status: 'True',
            reason: 'DeletionByPodGC',
            message: 'PodGC: node no longer exists',
            lastTransitionTime: now,
          },
        ],
      };
      return await t.core.replaceNamespacedPodStatus({ name, namespace: t.namespace, body: pod });
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt >= 10) throw err;
    }
  }
}

/**
 * patchLockSpec sets one field of a lock's spec and waits (up to 10 s) until the controller has
 * reconciled that generation (status.observedGeneration), so that its next decision uses it.
 */
export async function patchLockSpec(t: TestKube, name: string, field: string, value: number): Promise<void> {
  const patched = (await t.custom.patchNamespacedCustomObject(
    {
      group: GROUP,
      version: VERSION,
      namespace: t.namespace,
      plural: PLURAL,
      name,
      body: [{ op: 'add', path: `/spec/${field}`, value }],
    },
    jsonPatch,
  )) as DistributedLock;
  const generation = patched.metadata?.generation ?? 0;
  for (let i = 0; i < 200; i++) {
    const seen = await getLock(t, name).then(
      (l) => l.status?.observedGeneration ?? 0,
      () => 0,
    );
    if (seen >= generation) return;
    await sleep(50);
  }
}

/** forceDelete deletes a pod with grace period 0, as the pod GC does. */
async function forceDelete(t: TestKube, name: string): Promise<void> {
  await t.core.deleteNamespacedPod({ name, namespace: t.namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
}

/**
 * earlyGrant: from the Lease history, whether the first grant of a later term to another holder
 * came before `holder`'s last renewal of `token` plus windowMs (wall clocks of the writers: the
 * agent's renewTime, the controller's at its grant; one machine). Undefined when there is no such
 * grant, or it came before sinceWallMs (the fault).
 */
export function earlyGrant(
  leases: readonly LeaseVersion[],
  holder: string,
  token: bigint,
  windowMs: number,
  sinceWallMs: number,
): { early: boolean; gapMs: number } | undefined {
  const byRv = [...leases].sort((a, b) => (a.resourceVersion < b.resourceVersion ? -1 : 1));
  const renewals = byRv.filter((v) => v.holder === holder && v.token === token && v.renewTime !== undefined);
  const successor = byRv.find(
    (v) => v.holder !== undefined && v.holder !== holder && v.token !== undefined && v.token > token,
  );
  const lastRenewal = renewals.at(-1);
  const last = lastRenewal?.renewTime;
  // A successor granted before the fault: the holder had lost the lock already (a busy machine).
  if (
    lastRenewal === undefined ||
    last === undefined ||
    successor?.renewTime === undefined ||
    wallMs(successor.renewTime) < sinceWallMs
  )
    return undefined;
  // A term its holder released itself (it stepped down on its own, e.g. its renewals failed on a
  // busy machine before the cut) is handed over at once, rightly: no lease or lock delay to wait.
  if (
    byRv.some(
      (v) =>
        v.resourceVersion > lastRenewal.resourceVersion &&
        v.resourceVersion < successor.resourceVersion &&
        v.release === 'Released',
    )
  )
    return undefined;
  const gapMs = wallMs(successor.renewTime) - wallMs(last);
  return { early: gapMs < windowMs, gapMs };
}

/** stillBelieved: the holder's last report before `at` was a grant or renewal of its term (lease-delete's test). */
export function stillBelieved(events: readonly ClientEvent[], holder: string, at: number): boolean {
  const last = events
    .filter((e) => e.holder === holder && e.at <= at && ['granted', 'renewed', 'lost', 'released'].includes(e.kind))
    .sort((x, y) => x.at - y.at)
    .at(-1);
  return last !== undefined && (last.kind === 'granted' || last.kind === 'renewed');
}

/** nodeLoss runs one node-loss trial's fault on the holder. */
export async function nodeLoss(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  // Calibrating, always the mark that stays (a finalizer keeps the pod): with the force deletion
  // right after it, the pod may be gone before the controller has seen the mark.
  const drawn = ctx.pick(NODE_LOSS_ACTIONS);
  const action: NodeLossAction = ctx.spec.calibrate === 'phase-proof' ? 'mark-failed' : drawn;
  const delaySeconds = ctx.pick(NODE_LOSS_LOCK_DELAYS);
  const { t } = ctx.bed;
  if (delaySeconds > 0) await patchLockSpec(t, ctx.spec.id, 'lockDelaySeconds', delaySeconds);
  await sleep(ctx.uniform(0, ctx.leaseMs / 2));
  const lost = ctx.next(h.w, (e) => e.kind === 'lost', 10 * ctx.leaseMs, 'lost').catch(() => undefined);
  // The node is cut off: its processes run on, unable to reach the API server.
  h.w.apiProxy.blackhole();
  const startAt = performance.now();
  const startWall = performance.timeOrigin + startAt;
  // The pod GC acts early in what is left of the holder's term: its last renewal was at most a
  // renew period (L/3) before the cut, so the mark comes at most 0.63 L after it, and a controller
  // that took the mark as proof would grant with at least 0.37 L of the lease left.
  await sleep(ctx.uniform(0, 0.3) * ctx.leaseMs);
  if (action !== 'delete') await markFailedByPodGC(t, h.pod).catch(() => undefined);
  if (action !== 'mark-failed') await forceDelete(t, h.pod);
  const l = await lost;
  await ctx.progress(h.token, 30_000);
  h.w.apiProxy.heal();
  const windowMs = ctx.leaseMs + delaySeconds * 1000;
  const grant = ctx.events.find((e) => e.kind === 'granted' && e.token > h.token && e.at >= startAt);
  const before = ctx.events.some(
    (e) => e.at < startAt && ((e.kind === 'granted' && e.token > h.token) || (e.kind === 'lost' && e.holder === h.id)),
  );
  return {
    variant: `${action}, lock delay ${delaySeconds} s${before ? ' (not holding)' : ''}`,
    faultMs: performance.now() - startAt,
    startAt,
    above: h.token,
    resumed: h.w,
    ...(l !== undefined ? { stepDownMs: l.e.at - startAt } : {}),
    tally: (leases) => {
      const e = earlyGrant(leases, h.id, h.token, windowMs, startWall);
      if (e?.early === true && process.env['SAFETY_DEBUG'] !== undefined)
        process.stderr.write(
          `EARLY ${ctx.spec.id} seed ${ctx.spec.seed} ${action} D=${delaySeconds} gap=${e.gapMs} startWall=${new Date(startWall).toISOString()} h=${h.id}#${h.token}\n${leases.map((v) => `  rv ${v.resourceVersion} at ${Math.round(v.at)} ${String(v.holder)}#${String(v.token)} renew ${String(v.renewTime)} rel ${String(v.release)}`).join('\n')}\n${ctx.events
            .filter((x) => x.kind !== 'attempt' && x.kind !== 'outcome')
            .map((x) => `  ev ${x.kind} ${Math.round(x.at)} ${x.holder}`)
            .join('\n')}\n`,
        );
      return {
        grantedBeforeLeaseEnd: e?.early === true ? 1 : 0,
        grantedBeforeStepDown: grant !== undefined && stillBelieved(ctx.events, h.id, grant.at) ? 1 : 0,
      };
    },
  };
}
