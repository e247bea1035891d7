/**
 * soak.ts — `npm run soak -- --trials N`: the safety suite at large N. Starts its own control
 * plane (etcd + kube-apiserver), two redis-servers, the controller and a pool of worker
 * processes, runs N trials per fault type (each on its own lock, --concurrency at a time), checks
 * every history, prints the fault table and writes it as JSON.
 *
 *   node hack/soak.ts --trials 1000                     every fault type, 1000 trials each
 *   node hack/soak.ts --fault pause --trials 1 --seed 42  replay one trial
 *   node hack/soak.ts --calibrate guard --fault pause     the same faults with the guard removed
 *   node hack/soak.ts --calibrate floor --fault redis     ... with the etcd floor removed
 *   node hack/soak.ts --calibrate lost-marker --fault lease-delete   ... a deleted Lease re-created without the Lost marker
 *   node hack/soak.ts --calibrate no-recheck --fault run-id-fleet    ... the run-once gate without its check after the grant
 *   node hack/soak.ts --calibrate key-scope --fault multi-key        ... the multi-key guard with one mark per key
 *   node hack/soak.ts --calibrate status-floor --fault co-tenant     ... a co-tenant lowering Lease and status (no status floor)
 *   node hack/soak.ts --calibrate wedge --fault co-tenant            ... a co-tenant raising the token to 2^63−1, nobody repairing it
 *   node hack/soak.ts --calibrate child-only --fault exec-tree       ... exec signalling only its direct child
 *   node hack/soak.ts --calibrate no-drain --fault exec-handover     ... exec deaf to planned handovers
 *   node hack/soak.ts --calibrate phase-proof --fault node-loss      ... a controller taking phase Failed as proof
 *   node hack/soak.ts --calibrate permits --fault semaphore          ... a controller granting one permit more than spec.permits
 *   node hack/soak.ts --nemesis-minutes 15 --seed S       the combined nemesis (overlapping faults) instead of trials
 *
 * Exit code: 0 when every trial held S1–S5 and no holder took a term up again after reporting it
 * lost (or, calibrating, when violations were found), 1 otherwise.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/support/testbed/control-plane.ts';
import { resultsPath } from './results.ts';
import { formatFailures, runTrials, summarize, type FaultSummary } from '../test/safety/runner.ts';
import { formatOutageTable } from '../test/safety/faults/apiserver.ts';
import { formatStepDowns, formatTable } from '../test/safety/report.ts';
import { startSafetyBed } from '../test/safety/testbed.ts';
import { CALIBRATIONS, FAULT_TYPES, type Calibration, type FaultType, type TrialResult } from '../test/safety/trial.ts';
import { runNemesisSoak } from '../test/safety/nemesis-soak.ts';

const USAGE = `Usage: node hack/soak.ts [--trials N] [--fault TYPE ...] [--concurrency K] [--seed S] [--lease SECONDS]
                          [--calibrate ${CALIBRATIONS.join('|')}] [--minutes-per-fault M] [--out FILE] [--keep-logs]
                          [--nemesis-minutes M]
  --minutes-per-fault M   stop starting new trials of a fault type after M minutes (the table
                          then reports the trials actually run); results are written after each fault type
  --out FILE              the run's raw JSON (default .results/soak/soak-<time>.json, not committed;
                          node hack/soak-totals.ts --write FILE adds it to the committed summaries)
  --nemesis-minutes M     the combined nemesis instead: 4 candidates, 3 locks, a seeded fault every U[5, 15] s
                          for M minutes, then a final heal (--seed, --lease and --out apply)
Fault types: ${FAULT_TYPES.join(', ')}
`;

let opts: {
  trials: number;
  faults: FaultType[];
  concurrency: number;
  seed: number;
  lease: number;
  calibrate: Calibration | undefined;
  out: string;
  keepLogs: boolean;
  phaseMinutes: number | undefined;
  nemesisMinutes: number | undefined;
};
try {
  const { values } = parseArgs({
    strict: true,
    options: {
      trials: { type: 'string', default: '20' },
      fault: { type: 'string', multiple: true },
      concurrency: { type: 'string', default: '4' },
      seed: { type: 'string' },
      lease: { type: 'string', default: '2' },
      calibrate: { type: 'string' },
      out: { type: 'string' },
      'keep-logs': { type: 'boolean', default: false },
      'minutes-per-fault': { type: 'string' },
      'nemesis-minutes': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const int = (text: string, flag: string, min: number): number => {
    if (!/^[0-9]+$/.test(text) || Number(text) < min)
      throw new Error(`${flag}: expected an integer >= ${min}, got ${JSON.stringify(text)}`);
    return Number(text);
  };
  const faults = (values.fault ?? FAULT_TYPES.filter((f) => f !== 'none')).map((f) => {
    if (!(FAULT_TYPES as readonly string[]).includes(f))
      throw new Error(`--fault: unknown fault type ${JSON.stringify(f)}`);
    return f as FaultType;
  });
  const given = values.calibrate;
  if (given !== undefined && !(CALIBRATIONS as readonly string[]).includes(given))
    throw new Error(`--calibrate: expected one of ${CALIBRATIONS.join(', ')}, got ${JSON.stringify(given)}`);
  const calibrate = given as Calibration | undefined;
  const seed = values.seed !== undefined ? int(values.seed, '--seed', 0) : Math.floor(Math.random() * 2 ** 31);
  opts = {
    trials: int(values.trials, '--trials', 1),
    faults,
    concurrency: int(values.concurrency, '--concurrency', 1),
    seed,
    lease: int(values.lease, '--lease', 1),
    calibrate,
    out:
      values.out ??
      resultsPath(
        'soak',
        `${values['nemesis-minutes'] !== undefined ? 'nemesis-' : ''}soak-${calibrate !== undefined ? `calibrate-${calibrate}-` : ''}${new Date().toISOString().replace(/[:.]/g, '-')}.json`,
      ),
    keepLogs: values['keep-logs'],
    phaseMinutes:
      values['minutes-per-fault'] !== undefined
        ? int(values['minutes-per-fault'], '--minutes-per-fault', 1)
        : undefined,
    nemesisMinutes:
      values['nemesis-minutes'] !== undefined ? int(values['nemesis-minutes'], '--nemesis-minutes', 1) : undefined,
  };
} catch (err) {
  process.stderr.write(`soak: ${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
  process.exit(2);
}

const began = performance.now();
if (opts.nemesisMinutes === undefined)
  process.stderr.write(
    `soak: seed ${opts.seed}, ${opts.trials} trial(s) per fault type (${opts.faults.join(', ')}), concurrency ${opts.concurrency}, lease ${opts.lease} s${opts.calibrate !== undefined ? `, CALIBRATION: ${opts.calibrate} disabled` : ''}\n`,
  );
const plane = await startControlPlane();
// The plane is ours: the apiserver fault may stop and pause its kube-apiserver and etcd.
const bed = await startSafetyBed({
  kubeconfigPath: plane.kubeconfigPath,
  noFloor: opts.calibrate === 'floor',
  phaseProof: opts.calibrate === 'phase-proof',
  overGrant: opts.calibrate === 'permits',
  ...(opts.faults.includes('apiserver') ? { plane } : {}),
});
let stopping = false;
const stop = async (code: number, keep: boolean): Promise<never> => {
  stopping = true;
  await bed.close(keep || opts.keepLogs);
  await plane.stop();
  if (keep || opts.keepLogs) process.stderr.write(`soak: logs kept in ${bed.dir}\n`);
  process.exit(code);
};
// Stopped by hand: keep the figures of the trials finished so far (writePartial), then clean up.
let onStopSignal = (): void => undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    if (!stopping) {
      onStopSignal();
      void stop(130, false);
    }
  });
if (opts.nemesisMinutes !== undefined) {
  const ok = await runNemesisSoak({
    bed,
    minutes: opts.nemesisMinutes,
    seed: opts.seed,
    leaseSeconds: opts.lease,
    out: opts.out,
    ...(opts.calibrate === 'guard' || opts.calibrate === 'floor' ? { calibrate: opts.calibrate } : {}),
    command: `node hack/soak.ts ${process.argv.slice(2).join(' ')}`,
  });
  await stop(ok ? 0 : 1, !ok && opts.calibrate === undefined);
}

const resultOf = (summaries: readonly FaultSummary[], complete: boolean): Record<string, unknown> => ({
  command: `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim(),
  complete,
  seed: opts.seed,
  trialsPerFault: opts.trials,
  concurrency: opts.concurrency,
  leaseSeconds: opts.lease,
  calibrate: opts.calibrate ?? null,
  minutesPerFault: opts.phaseMinutes ?? null,
  wallSeconds: Math.round((performance.now() - began) / 1000),
  workerProcessesStarted: bed.pool.started,
  controllerRestarts: bed.controllerRestarts,
  killRoundSizes: bed.killRoundSizes,
  storeLogBroken: bed.storeLog.broken,
  leaseWatchRestarts: bed.leases.restarts,
  leaseWatchExpired: bed.leases.expired,
  controlPlaneOutages: bed.outages?.outages ?? 0,
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? '',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
  },
  summaries,
});
const writeResult = (summaries: readonly FaultSummary[], complete: boolean): void => {
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, `${JSON.stringify(resultOf(summaries, complete), null, 2)}\n`);
};

let done = 0;
// Results so far, so that a run cut short (a crash, a deadline) still leaves its figures behind:
// every PARTIAL_EVERY trials the JSON is rewritten with the finished phases plus the current one.
const PARTIAL_EVERY = 100;
let finished: readonly FaultSummary[] = [];
let current: TrialResult[] = [];
const writePartial = (): void => {
  const wall = performance.now() - began;
  const ongoing = opts.faults
    .filter((f) => !finished.some((s) => s.fault === f) && current.some((r) => r.spec.fault === f))
    .map((f) =>
      summarize(
        f,
        current.filter((r) => r.spec.fault === f),
        wall,
        { leaseSeconds: opts.lease, ...(opts.calibrate !== undefined ? { calibrate: opts.calibrate } : {}) },
      ),
    );
  writeResult([...finished, ...ongoing], false);
};
onStopSignal = writePartial;
const total = opts.trials * opts.faults.length;
const ran = (): number => done;
let summaries: FaultSummary[];
try {
  summaries = await runTrials({
    bed,
    faults: opts.faults,
    trialsPerFault: opts.trials,
    concurrency: opts.concurrency,
    baseSeed: opts.seed,
    leaseSeconds: opts.lease,
    fenced: opts.calibrate !== 'guard',
    ...(opts.calibrate !== undefined ? { calibrate: opts.calibrate } : {}),
    ...(opts.phaseMinutes !== undefined ? { phaseBudgetMs: opts.phaseMinutes * 60_000 } : {}),
    onPhase: (s) => {
      finished = s;
      current = [];
      writeResult(s, false);
    },
    onResult: (r) => {
      done++;
      current.push(r);
      if (done % PARTIAL_EVERY === 0) writePartial();
      if (!r.report.ok || done % 25 === 0 || done === total) {
        process.stderr.write(
          `soak: ${done}/${total} (${Math.round((performance.now() - began) / 1000)} s)${r.report.ok ? '' : ` — ${r.spec.id} seed ${r.spec.seed} broke ${[...new Set(r.report.violations.map((v) => v.invariant))].join(',')}`}\n`,
        );
      }
    },
  });
} catch (err) {
  process.stderr.write(
    `soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n${bed.controllerLog()}\n`,
  );
  writePartial();
  await stop(1, true);
  throw err; // unreachable
}
const wallMs = performance.now() - began;
const violations = summaries.reduce((a, s) => a + s.failed.length, 0);
writeResult(summaries, true);
process.stdout.write(`${formatTable(summaries)}\n${formatStepDowns(summaries)}\n`);
const outageRows = summaries.flatMap((s) => s.outages ?? []);
if (outageRows.length > 0)
  process.stdout.write(`\nControl-plane outages (apiserver fault):\n${formatOutageTable(outageRows)}\n`);
const failures = formatFailures(summaries);
if (failures !== '') process.stdout.write(`\n${failures}\n`);
process.stdout.write(
  `\nseed ${opts.seed}; ${ran()} trials in ${Math.round(wallMs / 1000)} s; ${violations} trial(s) with violations; results in ${opts.out}\n`,
);
// A term taken up again after its holder reported it lost: a holder that stepped down must never use
// its old token again, since the successor's writes may already be above it.
const resumed = summaries.reduce((a, s) => a + (s.resumedAfterLoss ?? 0), 0);
if (resumed > 0) process.stdout.write(`${resumed} term(s) taken up again after their holder reported them lost\n`);
// A grant before a cut-off holder stepped down after its Lease was deleted: the deleted Lease must
// come back marked Lost, or the next pod is granted while the old holder still believes.
const early = summaries.reduce((a, s) => a + (s.counters['grantedBeforeStepDown'] ?? 0), 0);
if (early > 0) process.stdout.write(`${early} grant(s) before the cut-off holder stepped down (lease-delete)\n`);
// A run id run again after its completion: the run-once gate must look again after its grant, as a
// slow pod watch lets a second pod in after the first finished.
const runTwice = summaries.reduce((a, s) => a + (s.counters['runIdViolations'] ?? 0), 0);
if (runTwice > 0) process.stdout.write(`${runTwice} run id(s) run again after their completion (run-id-fleet)\n`);
// A Lease or status write of a co-tenant that the lease-protection policy let through (co-tenant, policy variant).
const bypassed = summaries.reduce((a, s) => a + (s.counters['policyBypassed'] ?? 0), 0);
if (bypassed > 0) process.stdout.write(`${bypassed} co-tenant write(s) the lease-protection policy let through\n`);
// A lock that was granted no more after a co-tenant's attacks (co-tenant: no grant after the hand-off).
const wedged = summaries.reduce((a, s) => a + (s.counters['wedged'] ?? 0), 0);
if (wedged > 0) process.stdout.write(`${wedged} lock(s) granted no more after a co-tenant's attacks (co-tenant)\n`);
// exec-tree (a grandchild of exec outliving the term) and node-loss (a pod's phase is no proof that its
// containers stopped): counters that must be 0.
const total15 = (names: readonly string[]): number =>
  summaries.reduce((a, s) => a + names.reduce((b, k) => b + (s.counters[k] ?? 0), 0), 0);
const TREE = ['treeWritesAfterGrant', 'treeAttemptsAfterGrant', 'treeWritesAfterResume', 'treeProcessesLeft'];
const tree = total15(TREE);
if (tree > 0)
  process.stdout.write(`${tree} tree write(s) after the grant or process(es) left (exec-tree, exec-handover)\n`);
const beforeLeaseEnd = total15(['grantedBeforeLeaseEnd']);
if (beforeLeaseEnd > 0)
  process.stdout.write(
    `${beforeLeaseEnd} grant(s) before the cut-off holder's lease (+ lock delay) ended (node-loss)\n`,
  );
// A planned handover: two believers without a pause, or a stale request that moved the lock.
const handoverWrong = total15(['handoverOverlap', 'staleHandedOver']);
if (handoverWrong > 0)
  process.stdout.write(`${handoverWrong} handover(s) with two believers or moved by a stale request (handover)\n`);
const ok =
  opts.calibrate === 'lost-marker'
    ? early > 0
    : opts.calibrate === 'no-recheck'
      ? runTwice > 0
      : opts.calibrate === 'child-only' || opts.calibrate === 'no-drain'
        ? tree > 0
        : opts.calibrate === 'wedge'
          ? wedged > 0
          : opts.calibrate === 'phase-proof'
            ? beforeLeaseEnd > 0
            : opts.calibrate !== undefined
              ? violations > 0
              : violations === 0 &&
                resumed === 0 &&
                early === 0 &&
                runTwice === 0 &&
                bypassed === 0 &&
                wedged === 0 &&
                tree === 0 &&
                beforeLeaseEnd === 0 &&
                handoverWrong === 0;
await stop(ok ? 0 : 1, !ok && opts.calibrate === undefined);
