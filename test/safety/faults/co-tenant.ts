/**
 * co-tenant: an adversarial principal in the lock's namespace — a ServiceAccount with the usual
 * client-go leader-election Role (leases get/list/watch/create/update/patch/delete) plus pods
 * patch, pods/status patch and DistributedLock status patch, as a co-tenant app, a CI bot or a
 * namespace admin has — attacks a held lock 1–3 times at random:
 *
 * - `lower-token`: the Lease's fencing-token annotation set to the holder's token − 1;
 * - `raise-token`: the annotation set to 2^63−1 (policy variant only: see NO_POLICY_ATTACKS);
 * - `shorten`: the Lease's leaseDurationSeconds set to 1;
 * - `delete-lease`: the Lease deleted;
 * - `impostor-lease`: the Lease deleted and re-created at once by the attacker as a `dlock-*`
 *   Lease with no holder, no Lost marker and token annotation 1;
 * - `patch-status`: the lock's status.fencingToken patched to 2^63−1;
 * - `relabel-pod`: the other candidate's pod marked as the lock's holder (holder label and a
 *   fencing-token annotation above the holder's), or the holder's pod stripped of its candidate label;
 * - `pod-failed`: the holder's pod marked Failed (its container terminated) through pods/status.
 *
 * Two variants, drawn per trial. `policy`: the chart's lease-protection ValidatingAdmissionPolicy
 * (charts/fencepost/templates/lease-protection-policy.yaml, rendered by helm as
 * test/integration/chart/lease-protection.test.ts does) is installed, and every Lease and status
 * write of the attacker must be denied by it (the counter `policyBypassed` must be 0; pod writes
 * are outside that policy and go through). `no-policy`: the attacker is a second ServiceAccount
 * with the same Role that the policy exempts (listed in `leaseProtection.extraWriters`), so the
 * API server treats its writes as if no policy were installed: the controller's own defences —
 * the status floor, `LeaseTampered`, the Lost-term wait, the longer of the Lease's and the spec's
 * lease duration — must keep S1–S5 (tokens never repeat).
 *
 * After the attacks and 2–3 lease durations in which the controller could misbehave, an
 * operator repairs only what no controller can: a token annotation or status raised to 2^63−1 is
 * set back to the last token issued (and with the Redis backend a counter raised to 2^63−1 is
 * deleted, to be refloored). A lowered token is left as the attacker wrote it: the controller
 * must grant above every token known by itself. Then the first holder hands the lock over (pod
 * unready, release), and within 6 lease durations + 15 s a term granted above the first holder's
 * token must be held — granted and not lost or released since (counter `wedged`, which must be
 * 0): no attack may wedge the lock.
 *
 * The attacker's token values are not the controller's: the Lease history handed to the checker
 * has each lowered one, and each raised one no holder adopted, replaced by the token it overwrote
 * (only in versions after the attack that still carry it and name no other holder), so S1's
 * "the annotation never decreases" and "each term's token is above the last" check the
 * controller's grants, not the attacker's writes.
 *
 * Calibration `wedge`: no policy, one `raise-token` (2^63−1, which leaves no token to issue) and
 * no repair: the hand-off is followed by no grant, which the wedge check must report.
 *
 * Calibration `status-floor`: no policy, the Lease backend, and each `lower-token` also lowers
 * status.fencingToken to the same value — the controller's floor is then the Lease alone, as
 * before the status floor — and no repair: the next grant re-issues the holder's token, which the
 * checker must report (S1).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  AdmissionregistrationV1Api,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  loadAllYaml,
  type KubeConfig,
  type V1Lease,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type DistributedLockSpec } from '../../../src/api/v1alpha1/distributedlock.ts';
import { LOCK_LABEL, TOKEN_ANNOTATION, leaseName, podKeys } from '../../../src/protocol/names.ts';
import { serviceAccountKubeConfig } from '../../support/fixtures.ts';
import { findBinary } from '../../support/testbed/assets.ts';
import { checkHistory, type TrialReport } from '../checker.ts';
import type { LeaseVersion, TrialHistory } from '../history.ts';
import type { SafetyBed } from '../testbed.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';

const run = promisify(execFile);
const CHART = join(resolve(import.meta.dirname, '../../..'), 'charts/fencepost');
/** MAX_TOKEN_TEXT: 2^63−1, the largest token. */
const MAX_TOKEN_TEXT = '9223372036854775807';
const MAX_TOKEN = BigInt(MAX_TOKEN_TEXT);

export const ATTACKS = [
  'lower-token',
  'raise-token',
  'shorten',
  'delete-lease',
  'impostor-lease',
  'patch-status',
  'relabel-pod',
  'pod-failed',
] as const;
type Attack = (typeof ATTACKS)[number];
/**
 * NO_POLICY_ATTACKS: without the policy, no `raise-token`. A token annotation raised on a held
 * Lease is a forged grant: the holder's agent adopts it (a Lease naming its pod with a larger token
 * is what a grant looks like) and writes with it, and nothing the controller does can undo that —
 * raised to 2^63−1 it becomes every guard's mark for good (smoke run, seed 26), and raised and
 * then lowered by one before the controller recorded it, the next grant re-issues the forged token
 * to another holder (soak seed 7171, trial 929, replay seed 8100: S1 and S2). Only the policy stops it.
 */
const NO_POLICY_ATTACKS: readonly Attack[] = ATTACKS.filter((a) => a !== 'raise-token');
/** LEASE_OR_STATUS: the attacks the lease-protection policy must deny. */
const LEASE_OR_STATUS: ReadonlySet<Attack> = new Set<Attack>([
  'lower-token',
  'raise-token',
  'shorten',
  'delete-lease',
  'impostor-lease',
  'patch-status',
]);

/** CoTenantBed: the attacker principals and the policy, once per bed. */
interface CoTenantBed {
  /** protected: the attacker the policy applies to; exempt: the same Role, exempted (no policy). */
  readonly protectedKc: KubeConfig;
  readonly exemptKc: KubeConfig;
  readonly close: () => Promise<void>;
}
const beds = new WeakMap<SafetyBed, Promise<CoTenantBed>>();

/** Attempt: one attacker write and what the API server answered. */
interface Attempt {
  readonly attack: Attack;
  readonly code: number;
  readonly message: string;
  /** bogus: a token value this (allowed) write put on the Lease, and the resourceVersion it made. */
  readonly bogus?: {
    readonly token: bigint;
    readonly rv: bigint;
    readonly replaced: bigint | undefined;
    readonly raised?: boolean;
  };
}
interface TrialState {
  readonly backend: 'Lease' | 'Redis';
  readonly attempts: Attempt[];
  policy: boolean;
  repairs: number;
  /** wedged: no grant above the tokens reported came within the bound after the hand-off. */
  wedged?: boolean;
}
const trials = new WeakMap<Ctx, TrialState>();

/** errorOf: the HTTP status and message of a failed call (200 when it did not fail). */
function errorOf(err: unknown): { code: number; message: string } {
  const code = (err as { code?: number }).code ?? 0;
  const body = (err as { body?: unknown }).body;
  const text = typeof body === 'string' ? body : err instanceof Error ? err.message : String(err);
  try {
    return { code, message: (JSON.parse(text) as { message?: string }).message ?? text };
  } catch {
    return { code, message: text };
  }
}

async function attempt<T>(call: () => Promise<T>): Promise<{ code: number; message: string; value?: T }> {
  try {
    return { code: 200, message: '(allowed)', value: await call() };
  } catch (err) {
    return errorOf(err);
  }
}

/** setUp creates the attacker principals and installs the chart's lease-protection policy, bound to the bed's namespace. */
async function setUp(bed: SafetyBed): Promise<CoTenantBed> {
  const { t } = bed;
  const ns = t.namespace;
  const review = await t.kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
  const admin = review.status?.userInfo?.username;
  if (admin === undefined) throw new Error('co-tenant: no username for the admin kubeconfig');
  const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace: ns,
    body: {
      metadata: { name: 'cotenant-leader-election' },
      rules: [
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
        },
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
        { apiGroups: [''], resources: ['pods/status'], verbs: ['get', 'patch', 'update'] },
        { apiGroups: [GROUP], resources: [PLURAL], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [GROUP], resources: [`${PLURAL}/status`], verbs: ['get', 'patch', 'update'] },
      ],
    },
  });
  const names = ['cotenant-app', 'cotenant-exempt'];
  for (const name of names) {
    await t.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: `cotenant-leader-election-${name}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cotenant-leader-election' },
        subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
      },
    });
  }
  const [protectedKc, exemptKc] = await Promise.all(names.map((n) => serviceAccountKubeConfig(t.kc, ns, n)));
  if (protectedKc === undefined || exemptKc === undefined) throw new Error('co-tenant: no kubeconfigs');
  const { stdout } = await run(
    findBinary('helm'),
    [
      'template',
      'r',
      CHART,
      '--namespace',
      `${ns}-release`,
      '--kube-version',
      '1.36.3',
      '--set',
      `leaseProtection.namespaces={${ns}}`,
      '--set-json',
      `leaseProtection.extraWriters=${JSON.stringify([admin, `system:serviceaccount:${ns}:cotenant-exempt`])}`,
      '--show-only',
      'templates/lease-protection-policy.yaml',
    ],
    { maxBuffer: 8 * 1024 * 1024 },
  );
  const adm = t.kc.makeApiClient(AdmissionregistrationV1Api);
  const made: { policies: string[]; bindings: string[] } = { policies: [], bindings: [] };
  // Scoped to the co-tenant trials' locks (`co-tenant-*`), so that the other fault types of the
  // run, interleaved in the same namespace, never meet the policy.
  const scope = {
    name: 'co-tenant-trials',
    expression:
      "request.resource.group == 'fencepost.io' ? request.name.startsWith('co-tenant-') : ((request.operation != 'DELETE' && object.metadata.name.startsWith('dlock-co-tenant-')) || (request.operation != 'CREATE' && oldObject.metadata.name.startsWith('dlock-co-tenant-')))",
  };
  for (const doc of loadAllYaml(stdout) as (V1ValidatingAdmissionPolicy | V1ValidatingAdmissionPolicyBinding)[]) {
    const name = `${doc.metadata?.name ?? ''}-${ns}`;
    if (doc.kind === 'ValidatingAdmissionPolicy') {
      const p = doc as V1ValidatingAdmissionPolicy;
      await adm.createValidatingAdmissionPolicy({
        body: {
          ...p,
          metadata: { name },
          spec: { ...p.spec, matchConditions: [...(p.spec?.matchConditions ?? []), scope] },
        },
      });
      made.policies.push(name);
    } else {
      const b = doc as V1ValidatingAdmissionPolicyBinding;
      await adm.createValidatingAdmissionPolicyBinding({
        body: { ...b, metadata: { name }, spec: { ...b.spec, policyName: `${b.spec?.policyName ?? ''}-${ns}` } },
      });
      made.bindings.push(name);
    }
  }
  if (made.policies.length === 0 || made.bindings.length === 0)
    throw new Error('co-tenant: the chart rendered no lease-protection policy');
  const close = async (): Promise<void> => {
    for (const name of made.bindings) await adm.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    for (const name of made.policies) await adm.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
  };
  // The policy takes a moment to reach the admission chain: wait until a probe is denied.
  const probe = leaseName('co-tenant-probe');
  const leases = protectedKc.makeApiClient(CoordinationV1Api);
  for (let i = 0; ; i++) {
    const r = await attempt(() =>
      leases.createNamespacedLease({ namespace: ns, body: { metadata: { name: probe }, spec: {} } }),
    );
    if (r.code === 200) await t.leases.deleteNamespacedLease({ namespace: ns, name: probe }).catch(() => undefined);
    if (r.code === 403) break;
    if (i >= 100) {
      await close();
      throw new Error(
        `co-tenant: the lease-protection policy did not take effect in 30 s (last: ${r.code} ${r.message})`,
      );
    }
    await sleep(300);
  }
  return { protectedKc, exemptKc, close };
}

/** closeCoTenant removes the policy a bed's co-tenant trials installed (cluster-scoped objects). */
export async function closeCoTenant(bed: SafetyBed): Promise<void> {
  const p = beds.get(bed);
  beds.delete(bed);
  if (p !== undefined) await (await p.catch(() => undefined))?.close();
}

/**
 * coTenantLockSpec draws the trial's fencing backend (the chart's default, Lease, or Redis) before
 * its lock is created; the `status-floor` calibration always takes the Lease backend.
 */
export function coTenantLockSpec(ctx: Ctx): Partial<DistributedLockSpec> {
  const backend = ctx.spec.calibrate === 'status-floor' ? 'Lease' : ctx.pick(['Lease', 'Redis'] as const);
  trials.set(ctx, { backend, attempts: [], policy: false, repairs: 0 });
  return { fencing: { backend } };
}

/** coTenant is the fault script. */
export async function coTenant(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  const state = trials.get(ctx) ?? { backend: 'Redis', attempts: [], policy: false, repairs: 0 };
  trials.set(ctx, state);
  const { t } = ctx.bed;
  const ns = t.namespace;
  const calibrating = ctx.spec.calibrate === 'status-floor';
  const wedging = ctx.spec.calibrate === 'wedge';
  state.policy = calibrating || wedging ? false : ctx.rnd() < 0.5;
  let setup = beds.get(ctx.bed);
  if (setup === undefined) {
    setup = setUp(ctx.bed);
    beds.set(ctx.bed, setup);
  }
  const principals = await setup;
  const kc = state.policy ? principals.protectedKc : principals.exemptKc;
  const leases = kc.makeApiClient(CoordinationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const name = leaseName(ctx.spec.id);
  const keys = podKeys(ctx.spec.id);
  const otherPod = h.pod === `${ctx.spec.id}-a` ? `${ctx.spec.id}-b` : `${ctx.spec.id}-a`;
  const tokenOf = (l: V1Lease | undefined): bigint | undefined => {
    const v = l?.metadata?.annotations?.[TOKEN_ANNOTATION];
    return v !== undefined && /^(0|[1-9][0-9]{0,18})$/.test(v) ? BigInt(v) : undefined;
  };
  const readLease = (): Promise<V1Lease | undefined> =>
    t.leases.readNamespacedLease({ namespace: ns, name }).catch(() => undefined);
  /** setToken replaces the Lease's token annotation as the attacker; records the bogus value it wrote. */
  const setToken = async (attack: Attack, value: (cur: bigint) => bigint): Promise<void> => {
    const l = await readLease();
    const cur = tokenOf(l);
    if (l === undefined || cur === undefined) {
      state.attempts.push({ attack, code: 0, message: 'no Lease to attack' });
      return;
    }
    const next = value(cur);
    const r = await attempt(() =>
      leases.replaceNamespacedLease({
        namespace: ns,
        name,
        body: {
          ...l,
          metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: next.toString() } },
        },
      }),
    );
    const rv = r.value?.metadata?.resourceVersion;
    state.attempts.push({
      attack,
      code: r.code,
      message: r.message,
      // Not the controller's value (checkCoTenant decides what the checker sees of it).
      ...(r.code === 200 && rv !== undefined
        ? { bogus: { token: next, rv: BigInt(rv), replaced: cur, raised: next > cur } }
        : {}),
    });
    if (calibrating && r.code === 200 && attack === 'lower-token') {
      // The controller's other record: lowered to match, so that its floor is the Lease alone.
      for (let i = 0; i < 5; i++) {
        await attempt(() => patchStatus(custom, ns, ctx.spec.id, next.toString()));
        await sleep(200);
        const lock = await readLock(t.custom, ns, ctx.spec.id);
        if (lock?.status?.fencingToken === next.toString()) break;
      }
    }
  };
  const attacks: Record<Attack, () => Promise<void>> = {
    'lower-token': () => setToken('lower-token', (cur) => (cur > 1n ? cur - 1n : 0n)),
    // Only where the policy must deny it (see NO_POLICY_ATTACKS).
    'raise-token': () => setToken('raise-token', () => MAX_TOKEN),
    async shorten() {
      const l = await readLease();
      if (l === undefined) return void state.attempts.push({ attack: 'shorten', code: 0, message: 'no Lease' });
      const r = await attempt(() =>
        leases.replaceNamespacedLease({
          namespace: ns,
          name,
          body: { ...l, spec: { ...l.spec, leaseDurationSeconds: 1 } },
        }),
      );
      state.attempts.push({ attack: 'shorten', code: r.code, message: r.message });
    },
    async ['delete-lease']() {
      const r = await attempt(() => leases.deleteNamespacedLease({ namespace: ns, name }));
      state.attempts.push({ attack: 'delete-lease', code: r.code, message: r.message });
    },
    async ['impostor-lease']() {
      const before = tokenOf(await readLease());
      await attempt(() => leases.deleteNamespacedLease({ namespace: ns, name }));
      const r = await attempt(() =>
        leases.createNamespacedLease({
          namespace: ns,
          body: {
            metadata: { name, labels: { [LOCK_LABEL]: ctx.spec.id }, annotations: { [TOKEN_ANNOTATION]: '1' } },
            spec: {},
          },
        }),
      );
      const rv = r.value?.metadata?.resourceVersion;
      state.attempts.push({
        attack: 'impostor-lease',
        code: r.code,
        message: r.message,
        ...(r.code === 200 && rv !== undefined ? { bogus: { token: 1n, rv: BigInt(rv), replaced: before } } : {}),
      });
    },
    async ['patch-status']() {
      const r = await attempt(() => patchStatus(custom, ns, ctx.spec.id, MAX_TOKEN_TEXT));
      state.attempts.push({ attack: 'patch-status', code: r.code, message: r.message });
    },
    async ['relabel-pod']() {
      const mark = ctx.rnd() < 0.5;
      const r = await attempt(async () => {
        const pod = await core.readNamespacedPod({ namespace: ns, name: mark ? otherPod : h.pod });
        const forged = (h.token + 5n).toString();
        const patch = mark
          ? [
              { op: 'add', path: `/metadata/labels/${esc(keys.holder)}`, value: 'true' },
              pod.metadata?.annotations !== undefined
                ? { op: 'add', path: `/metadata/annotations/${esc(keys.token)}`, value: forged }
                : { op: 'add', path: '/metadata/annotations', value: { [keys.token]: forged } },
            ]
          : [{ op: 'remove', path: '/metadata/labels/app' }];
        return core.patchNamespacedPod({ namespace: ns, name: pod.metadata?.name ?? '', body: patch });
      });
      state.attempts.push({ attack: 'relabel-pod', code: r.code, message: r.message });
    },
    async ['pod-failed']() {
      const now = new Date();
      const r = await attempt(async () => {
        const pod = await core.readNamespacedPod({ namespace: ns, name: h.pod });
        pod.status = {
          ...pod.status,
          phase: 'Failed',
          containerStatuses: (pod.status?.containerStatuses ?? []).map((c) => ({
            ...c,
            ready: false,
            state: { terminated: { exitCode: 137, reason: 'Error', startedAt: now, finishedAt: now } },
          })),
        };
        return core.replaceNamespacedPodStatus({ namespace: ns, name: h.pod, body: pod });
      });
      state.attempts.push({ attack: 'pod-failed', code: r.code, message: r.message });
    },
  };

  const n = calibrating || wedging ? 1 : 1 + Math.floor(ctx.rnd() * 3);
  const plan: Attack[] = Array.from({ length: n }, () =>
    calibrating ? 'lower-token' : wedging ? 'raise-token' : ctx.pick(state.policy ? ATTACKS : NO_POLICY_ATTACKS),
  );
  const startAt = performance.now();
  for (const a of plan) {
    await sleep(ctx.uniform(0, ctx.leaseMs));
    await attacks[a]();
  }
  // Give the controller 2–3 lease durations to misbehave before the operator steps in; then the
  // holder hands over (if it still holds), so that every trial ends with a grant after the attacks.
  await sleep(ctx.uniform(2, 3) * ctx.leaseMs);
  if (!calibrating && !wedging) await repair(ctx, state, h);
  const handedOffAt = performance.now();
  await ctx.handOff(h.w, h.id);
  // No wedge: by the bound after the hand-off (generous enough for a Lost Lease's wait, the longer
  // lease duration and a lock-delay), a term granted after the first holder's must be held — the
  // newest grant above its token not lost or released since. A lowered token is nobody's to
  // repair any more: the controller must grant above it by itself.
  const boundMs = 6 * ctx.leaseMs + 15_000;
  // First the hand-off itself: while the first holder's worker still holds a term (its own, or a
  // raised token it adopted), wait for it to report that term released or lost.
  while (holdsNow(ctx, h.id) && performance.now() - handedOffAt < boundMs) await sleep(100);
  while (!heldAbove(ctx, h.token) && performance.now() - handedOffAt < boundMs) await sleep(100);
  state.wedged = !heldAbove(ctx, h.token);
  return {
    variant: `${state.policy ? 'policy' : 'no-policy'}/${state.backend}: ${plan.join('+')}`,
    faultMs: performance.now() - startAt,
    startAt,
    above: h.token,
    resumed: h.w,
  };
}

/**
 * heldAbove: some term with a token above `token` was granted, and the newest such grant has not
 * been reported lost or released since (its holder still holds the lock).
 */
function heldAbove(ctx: Ctx, token: bigint): boolean {
  let newest: { holder: string; token: bigint; at: number } | undefined;
  for (const e of ctx.events)
    if (e.kind === 'granted' && e.token > token && (newest === undefined || e.token > newest.token))
      newest = { holder: e.holder, token: e.token, at: e.at };
  if (newest === undefined) return false;
  const n = newest;
  return !ctx.events.some(
    (e) => (e.kind === 'lost' || e.kind === 'released') && e.holder === n.holder && e.token === n.token && e.at >= n.at,
  );
}

/** holdsNow: the newest term granted to `holder` has not been reported lost or released. */
function holdsNow(ctx: Ctx, holder: string): boolean {
  const grants = ctx.events.filter((e) => e.kind === 'granted' && e.holder === holder);
  const newest = grants[grants.length - 1];
  if (newest === undefined || newest.kind !== 'granted') return false;
  return !ctx.events.some(
    (e) =>
      (e.kind === 'lost' || e.kind === 'released') &&
      e.holder === holder &&
      e.token === newest.token &&
      e.at >= newest.at,
  );
}

/** esc escapes a JSON-pointer segment. */
function esc(s: string): string {
  return s.replaceAll('~', '~0').replaceAll('/', '~1');
}

interface LockWithStatus {
  status?: { fencingToken?: string };
}
async function readLock(
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
): Promise<LockWithStatus | undefined> {
  return (await custom
    .getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name })
    .catch(() => undefined)) as LockWithStatus | undefined;
}
function patchStatus(custom: CustomObjectsApi, namespace: string, name: string, token: string): Promise<unknown> {
  return custom.patchNamespacedCustomObjectStatus({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: PLURAL,
    name,
    body: [{ op: 'add', path: '/status/fencingToken', value: token }],
  });
}

/**
 * repair: the operator (admin) sets back what the attacker lowered or raised — the Lease's token
 * annotation and status.fencingToken — to the last token issued (the largest granted so far),
 * and deletes a Redis counter that was raised to 2^63−1 (it is refloored from the Lease and
 * status). Repeated a few times: the controller may write status from a cache that has not seen
 * the repair yet.
 */
async function repair(ctx: Ctx, state: TrialState, h: Holder): Promise<void> {
  const { t } = ctx.bed;
  const ns = t.namespace;
  const name = leaseName(ctx.spec.id);
  for (let round = 0; round < 6; round++) {
    // What the LeaseTampered Event says to restore (status.fencingToken), unless the attacker raised
    // status itself; and never below a token a holder reported.
    const lock0 = await readLock(t.custom, ns, ctx.spec.id);
    const recorded = lock0?.status?.fencingToken;
    const statusToken =
      recorded !== undefined && recorded !== MAX_TOKEN_TEXT && /^[0-9]{1,19}$/.test(recorded) ? BigInt(recorded) : 0n;
    const reported = ctx.events.reduce((m, e) => (e.kind === 'granted' && e.token > m ? e.token : m), h.token);
    // ... and never below a token the controller put on the Lease (its history, without the attacker's values).
    const forged = new Set(state.attempts.flatMap((a) => (a.bogus !== undefined ? [a.bogus.token] : [])));
    const onLease = (await ctx.bed.leases.versions(ctx.spec.id)).reduce(
      (m, v) => (v.token !== undefined && !forged.has(v.token) && v.token !== MAX_TOKEN && v.token > m ? v.token : m),
      0n,
    );
    const issued = [statusToken, reported, onLease].reduce((m, x) => (x > m ? x : m), 0n);
    let fixed = false;
    const l = await t.leases.readNamespacedLease({ namespace: ns, name }).catch(() => undefined);
    const ann = l?.metadata?.annotations?.[TOKEN_ANNOTATION];
    const cur = ann !== undefined && /^(0|[1-9][0-9]{0,18})$/.test(ann) ? BigInt(ann) : undefined;
    // Only a token raised to the largest: a lowered one needs no operator (the controller grants
    // above every token known by itself, which the wedge check holds it to).
    if (l !== undefined && cur === MAX_TOKEN) {
      await t.leases
        .replaceNamespacedLease({
          namespace: ns,
          name,
          body: {
            ...l,
            metadata: {
              ...l.metadata,
              annotations: { ...l.metadata?.annotations, [TOKEN_ANNOTATION]: issued.toString() },
            },
          },
        })
        .catch(() => undefined);
      fixed = true;
    }
    const lock = await readLock(t.custom, ns, ctx.spec.id);
    if (lock?.status?.fencingToken === MAX_TOKEN_TEXT) {
      await patchStatus(t.custom, ns, ctx.spec.id, issued.toString()).catch(() => undefined);
      fixed = true;
    }
    if (state.backend === 'Redis') {
      const key = `fencepost:fence:${ns}/${ctx.spec.id}`;
      const client = ctx.bed.counter.client();
      client.on('error', () => undefined);
      try {
        const v = await client.get(key);
        if (v !== null && v.length >= 19) {
          await client.del(key);
          fixed = true;
        }
      } catch {
        /* the counter is down (another trial's fault): the next round tries again */
      } finally {
        client.disconnect();
      }
    }
    if (!fixed) return;
    state.repairs++;
    await sleep(500);
  }
}

/**
 * sanitize replaces, in the Lease history, each token value an allowed attacker write put there by
 * the token it overwrote, in the versions from that write on that still carry it and name no
 * holder or the holder of the term it overwrote (never a new term: a grant is the controller's).
 */
export function sanitize(
  leases: readonly LeaseVersion[],
  bogus: readonly NonNullable<Attempt['bogus']>[],
): LeaseVersion[] {
  const byRv = [...leases].sort((a, b) =>
    a.resourceVersion < b.resourceVersion ? -1 : a.resourceVersion > b.resourceVersion ? 1 : 0,
  );
  let real: bigint | undefined;
  let realHolder: string | undefined;
  return byRv.map((v) => {
    const b = bogus.find((x) => x.token === v.token && v.resourceVersion >= x.rv);
    if (b !== undefined && (v.holder === undefined || v.holder === realHolder)) {
      const token = real ?? b.replaced;
      return { ...v, token };
    }
    if (v.token !== undefined) real = v.token;
    if (v.holder !== undefined) realHolder = v.holder;
    return v;
  });
}

/** checkCoTenant checks a co-tenant trial: the sanitized history, and what the attacker got through. */
export function checkCoTenant(ctx: Ctx, h: TrialHistory): { report: TrialReport; counters: Record<string, number> } {
  const state = trials.get(ctx);
  const attempts = state?.attempts ?? [];
  // A lowered value is never a grant. A raised one that a holder's agent adopted (reported
  // `granted` with it) is a forged grant, a term like any other; one nobody adopted is noise (the
  // operator's repair may set the annotation below it again).
  const adopted = new Set(h.clients.flatMap((e) => (e.kind === 'granted' ? [e.token] : [])));
  const bogus = attempts.flatMap((a) =>
    a.bogus !== undefined && !(a.bogus.raised === true && adopted.has(a.bogus.token)) ? [a.bogus] : [],
  );
  const report = checkHistory({ ...h, leases: sanitize(h.leases, bogus) });
  const dump = process.env['SAFETY_COTENANT_DUMP'];
  if (!report.ok && dump !== undefined)
    writeFileSync(
      join(dump, `${ctx.spec.id}-${ctx.spec.seed}.json`),
      JSON.stringify({ attempts, leases: h.leases, clients: h.clients }, (_k, v: unknown) =>
        typeof v === 'bigint' ? v.toString() : v,
      ),
    );
  const leaseWrites = attempts.filter((a) => LEASE_OR_STATUS.has(a.attack) && a.code !== 0);
  const byPolicy = (a: Attempt): boolean => a.code === 403 && a.message.includes('fencepost Leases and lock status');
  return {
    report,
    counters: {
      attacks: attempts.length,
      attacksAllowed: attempts.filter((a) => a.code === 200).length,
      deniedByPolicy: attempts.filter(byPolicy).length,
      // With the policy installed every Lease and status write of the attacker must be denied by it.
      policyBypassed: state?.policy === true ? leaseWrites.filter((a) => a.code === 200).length : 0,
      repairs: state?.repairs ?? 0,
      // The lowered-token attack that went through (no policy): the controller must grant above by itself.
      loweredAllowed: attempts.filter(
        (a) => (a.attack === 'lower-token' || a.attack === 'impostor-lease') && a.code === 200,
      ).length,
      // No grant followed the hand-off within the bound: the lock was wedged.
      wedged: state?.wedged === true ? 1 : 0,
    },
  };
}
