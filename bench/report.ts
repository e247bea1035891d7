/**
 * report.ts — `npm run bench:report [-- --write]`: the markdown tables of docs/benchmarks.md,
 * generated from bench/results/*.json (compare, scale, scale-workers4, redis-fence,
 * agent-footprint, agent-imports), including the performance targets with met / missed and by how
 * much. Prints to stdout; with --write it replaces the part of docs/benchmarks.md between
 * `<!-- report:start -->` and `<!-- report:end -->` (the prose around it is written by hand).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { KEPT_DIR, type Stats } from './lib.ts';

interface Timings {
  readonly leaseDurationSeconds: number;
  readonly renewDeadlineSeconds: number;
  readonly retryPeriodSeconds: number;
}
interface Compare {
  readonly command: string;
  readonly runs: number;
  readonly date: string;
  readonly loadAverage: { readonly start: { one: number; five: number }; readonly end: { one: number; five: number } };
  readonly settings: { readonly equal: Timings; readonly systems: Record<string, { label: string; timings: Timings }> };
  readonly summary: Record<string, Record<string, Stats>>;
  readonly floor: Record<string, Stats>;
  readonly failures?: readonly { run: number; system: string; scenario: string; error: string }[];
  readonly unplannedHolderChanges?: Record<string, number>;
  readonly steady?: {
    readonly windowS: number;
    readonly idle: { requestsPerMinute: number; etcdWritesPerMinute: number };
    readonly rows: readonly {
      id: string;
      label: string;
      requestsPerMinute: number;
      etcdWritesPerMinute: number;
      byVerbResourcePerMinute: Record<string, number>;
    }[];
  };
}
interface ScaleSize {
  readonly locks: number;
  readonly completed: boolean;
  readonly allGrantedSeconds?: number;
  readonly grantedAtEnd: number;
  readonly grantsPerSecond?: number;
  readonly setupSeconds: number;
  readonly peakRssMiB: number;
  readonly peakHeapUsedMiB?: number;
  readonly steadyRssMiB?: number;
  readonly peakQueueDepth: number;
  readonly coldCpu: { controller: number; apiserver: number; etcd: number };
  readonly steadyCpu?: { controller: number; apiserver: number; etcd: number };
  readonly coldApiWritesPerS: number;
  readonly steadyApiWritesPerS?: number;
  readonly steadyRenewsPerS?: number;
  readonly steadyControllerWritesPerLockPerMin?: number;
  readonly controllerAtEnd?: Record<string, number>;
  readonly loadAverage: { start: { one: number } };
  readonly samples: readonly {
    phase: string;
    t: number;
    heapUsedMiB?: number;
    heapTotalMiB?: number;
    controllerRssMiB: number;
    controllerWrites?: number;
  }[];
}
interface Scale {
  readonly command: string;
  readonly settings: { workers?: number };
  readonly sizes: readonly ScaleSize[];
}

const read = <T>(file: string): T | undefined => {
  const p = join(KEPT_DIR, file);
  return existsSync(p) ? (JSON.parse(readFileSync(p, 'utf8')) as T) : undefined;
};
const ms = (v: number | undefined): string =>
  v === undefined || Number.isNaN(v)
    ? '—'
    : Math.abs(v) >= 1000
      ? `${(v / 1000).toFixed(2)} s`
      : Math.abs(v) < 1
        ? `${v.toFixed(3)} ms`
        : `${v.toFixed(1)} ms`;
const x = (v: number): string => `${v.toFixed(1)}×`;
const table = (head: readonly string[], rows: readonly (readonly string[])[]): string =>
  [
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

const out: string[] = [];
const targets: string[][] = [];
const compare = read<Compare>('compare.json');
if (compare !== undefined) {
  const S = compare.summary;
  const label = (id: string): string => compare.settings.systems[id]?.label ?? id;
  out.push(
    `### Side by side (\`${compare.command}\`, ${compare.date.slice(0, 16)}Z, load average ${compare.loadAverage.start.one} at start, ${compare.loadAverage.end.one} at end)`,
    '',
  );
  const rows: string[][] = [];
  const names: Record<string, string> = {
    handoff: 'voluntary handoff',
    'crash-silent': 'crash, silent',
    'crash-terminated': 'crash, pod reported terminated',
  };
  for (const [scenario, by] of Object.entries(S)) {
    for (const [id, s] of Object.entries(by)) {
      if (id.endsWith(':beyondLease')) continue;
      const beyond = by[`${id}:beyondLease`];
      rows.push([
        names[scenario] ?? scenario,
        label(id),
        ms(s.p50),
        ms(s.p90),
        ms(s.p99),
        ms(s.max),
        beyond !== undefined ? `${ms(beyond.p50)} / ${ms(beyond.p99)}` : '',
      ]);
    }
  }
  out.push(
    table(
      [
        'scenario',
        'system (lease / renew deadline / retry or renew period)',
        'p50',
        'p90',
        'p99',
        'max',
        'minus the lease: p50 / p99',
      ],
      rows,
    ),
    '',
  );
  const failed = compare.failures ?? [];
  const unplanned = Object.entries(compare.unplannedHolderChanges ?? {}).filter(([, n]) => n > 0);
  if (unplanned.length > 0)
    out.push(
      `Between runs, a holder lost its lease without being signalled (its renew did not come back within the renew deadline, and the other candidate was granted — the safety rule working on an overloaded machine): ${unplanned.map(([id, n]) => `${label(id)} ${n}×`).join(', ')}. The next run then started from the new holder.`,
      '',
    );
  out.push(
    failed.length === 0
      ? 'Every run finished.'
      : `${failed.length} run(s) did not finish within 60 s and are left out of the percentiles (the pair was restarted): ${failed.map((f) => `${f.scenario} run ${f.run}, ${f.system}: ${f.error.replace(/;.*$/, '')}`).join('; ')}.`,
    '',
  );
  const f = compare.floor;
  const cas = f['casMs'];
  const watch = f['watchMs'];
  const cn = f['clientNodeCasMs'];
  const pooled = f['pooledCasMs'];
  if (cas !== undefined && watch !== undefined) {
    out.push(
      table(
        ['floor (same API server, same run)', 'p50', 'p90', 'p99', 'max'],
        [
          [
            'bare Lease CAS (PUT with resourceVersion, one kept-alive connection)',
            ms(cas.p50),
            ms(cas.p90),
            ms(cas.p99),
            ms(cas.max),
          ],
          ['bare watch delivery (PUT returned → event)', ms(watch.p50), ms(watch.p90), ms(watch.p99), ms(watch.max)],
          ...(cn !== undefined
            ? [
                [
                  'Lease CAS with client-node, plain KubeConfig (new TLS connection per call)',
                  ms(cn.p50),
                  ms(cn.p90),
                  ms(cn.p99),
                  ms(cn.max),
                ],
              ]
            : []),
          ...(pooled !== undefined
            ? [
                [
                  'Lease CAS with client-node, PooledKubeConfig (as the agent and controller now call)',
                  ms(pooled.p50),
                  ms(pooled.p90),
                  ms(pooled.p99),
                  ms(pooled.max),
                ],
              ]
            : []),
        ],
      ),
      '',
    );
  }
  const fp = S['handoff']?.['fencepost'];
  const cgE = S['handoff']?.['client-go-equal'];
  const cgD = S['handoff']?.['client-go-defaults'];
  if (fp !== undefined && cas !== undefined && watch !== undefined) {
    const bare = cas.p50 + watch.p50;
    const protocol = 3 * cas.p50 + 2 * watch.p50;
    out.push(
      table(
        ['ratio (p50 unless said)', 'value'],
        [
          ...(cgE !== undefined
            ? [
                [
                  'client-go at equal settings ÷ fencepost, handoff p50 / p99',
                  `${x(cgE.p50 / fp.p50)} / ${x(cgE.p99 / fp.p99)}`,
                ],
              ]
            : []),
          ...(cgD !== undefined
            ? [
                [
                  'client-go at its defaults ÷ fencepost, handoff p50 / p99',
                  `${x(cgD.p50 / fp.p50)} / ${x(cgD.p99 / fp.p99)}`,
                ],
              ]
            : []),
          ['fencepost handoff ÷ bare floor (1 CAS + 1 watch delivery)', x(fp.p50 / bare)],
          [
            'fencepost handoff ÷ its protocol on the bare floor (release CAS, watch, grant CAS, watch, confirm CAS)',
            x(fp.p50 / protocol),
          ],
          ...(S['crash-terminated']?.['client-go-equal'] !== undefined &&
          S['crash-terminated']['fencepost'] !== undefined
            ? [
                [
                  'client-go (equal) ÷ fencepost, crash with the pod reported terminated',
                  x(
                    (S['crash-terminated']['client-go-equal']?.p50 ?? 0) /
                      (S['crash-terminated']['fencepost']?.p50 ?? 1),
                  ),
                ],
              ]
            : []),
        ],
      ),
      '',
    );
    targets.push([
      '(revised) voluntary handoff p50 ≤ 25 ms (SIGTERM to the holder → the successor says it holds)',
      ms(fp.p50),
      fp.p50 <= 25 ? 'met' : `missed by ${ms(fp.p50 - 25)} (${x(fp.p50 / 25)})`,
    ]);
    targets.push([
      '(revised) voluntary handoff p99 ≤ 100 ms',
      ms(fp.p99),
      fp.p99 <= 100 ? 'met' : `missed by ${ms(fp.p99 - 100)} (${x(fp.p99 / 100)})`,
    ]);
    if (cgE !== undefined)
      targets.push([
        '(revised) handoff ≥ 30× faster than client-go at equal settings, same run (p50)',
        x(cgE.p50 / fp.p50),
        cgE.p50 / fp.p50 >= 30 ? 'met' : `missed: ${x(cgE.p50 / fp.p50)} of 30×`,
      ]);
    targets.push([
      'handoff within 3× of the floor (p50 ÷ (CAS + watch))',
      x(fp.p50 / bare),
      fp.p50 / bare <= 3 ? 'met' : `missed: ${x(fp.p50 / bare)}`,
    ]);
  }
  const term = S['crash-terminated']?.['fencepost'];
  if (term !== undefined)
    targets.push([
      'pod reported terminated: successor ≤ 1 s (p99)',
      ms(term.p99),
      term.p99 <= 1000 ? 'met' : `missed by ${ms(term.p99 - 1000)}`,
    ]);
  const silent = S['crash-silent']?.['fencepost:beyondLease'];
  if (silent !== undefined)
    targets.push([
      'silent crash ≤ lease + 100 ms (p99)',
      `lease ${silent.p99 >= 0 ? '+' : '−'} ${ms(Math.abs(silent.p99))}`,
      silent.p99 <= 100 ? 'met' : `missed by ${ms(silent.p99 - 100)}`,
    ]);
  // A steady-state-only run (compare-steady.json) supersedes the one in compare.json when present.
  const steadyRun = read<Compare>('compare-steady.json');
  const st = steadyRun?.steady ?? compare.steady;
  if (st !== undefined) {
    const src = steadyRun?.steady !== undefined ? steadyRun : compare;
    out.push(
      `Steady state (\`${src.command}\`, load average ${src.loadAverage.start.one} at start), one lock, 3 candidates, ${st.windowS} s windows; idle (subtracted): ${st.idle.requestsPerMinute} requests/min, ${st.idle.etcdWritesPerMinute} etcd writes/min.`,
      '',
    );
    out.push(
      table(
        ['system', 'API requests / lock / minute', 'etcd writes / lock / minute', 'by verb and resource (per minute)'],
        st.rows.map((r) => [
          r.label,
          r.requestsPerMinute.toFixed(0),
          r.etcdWritesPerMinute.toFixed(0),
          Object.entries(r.byVerbResourcePerMinute)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
        ]),
      ),
      '',
    );
    const fpE = st.rows.find((r) => r.id === 'fencepost');
    const cgEq = st.rows.find((r) => r.id === 'client-go-equal');
    const fpD = st.rows.find((r) => r.id === 'fencepost-defaults');
    const cgDf = st.rows.find((r) => r.id === 'client-go-defaults');
    if (fpE !== undefined && cgEq !== undefined)
      targets.push([
        'steady-state requests per lock ≤ client-go (3 candidates, equal settings)',
        `${fpE.requestsPerMinute.toFixed(0)} vs ${cgEq.requestsPerMinute.toFixed(0)} /min`,
        fpE.requestsPerMinute <= cgEq.requestsPerMinute
          ? 'met'
          : `missed by ${(fpE.requestsPerMinute - cgEq.requestsPerMinute).toFixed(0)}/min`,
      ]);
    if (fpD !== undefined && cgDf !== undefined)
      targets.push([
        '… each at its defaults',
        `${fpD.requestsPerMinute.toFixed(0)} vs ${cgDf.requestsPerMinute.toFixed(0)} /min`,
        fpD.requestsPerMinute <= cgDf.requestsPerMinute
          ? 'met'
          : `missed by ${(fpD.requestsPerMinute - cgDf.requestsPerMinute).toFixed(0)}/min`,
      ]);
  }
}

for (const [file, title] of [
  ['scale.json', 'Scale'],
  ['scale-workers4.json', "Scale, the controller's default 4 workers"],
] as const) {
  const scale = read<Scale>(file);
  if (scale === undefined) continue;
  out.push(`### ${title} (\`${scale.command}\`)`, '');
  out.push(
    table(
      [
        'locks',
        'setup',
        'all granted after',
        'grants/s',
        'peak RSS',
        'peak V8 heap used',
        'RSS / heap used at the end',
        'peak queue',
        'CPU cold: controller / apiserver / etcd (cores)',
        'CPU steady',
        'API writes/s cold / steady',
        'reconciles per lock, mean reconcile time',
        'load avg at start',
      ],
      scale.sizes.map((s) => {
        const last = s.samples.at(-1);
        const rec = s.controllerAtEnd ?? {};
        const reconciles =
          (rec['reconcile_total{result=success}'] ?? 0) +
          (rec['reconcile_total{result=error}'] ?? 0) +
          (rec['reconcile_total{result=requeue}'] ?? 0) +
          (rec['reconcile_total{result=requeue_after}'] ?? 0);
        return [
          String(s.locks),
          `${s.setupSeconds.toFixed(0)} s`,
          s.completed
            ? `${s.allGrantedSeconds?.toFixed(1) ?? '?'} s`
            : `not within the timeout (${s.grantedAtEnd} granted)`,
          s.grantsPerSecond?.toFixed(1) ?? '—',
          `${s.peakRssMiB.toFixed(0)} MiB`,
          s.peakHeapUsedMiB !== undefined ? `${s.peakHeapUsedMiB.toFixed(0)} MiB` : '—',
          last !== undefined ? `${last.controllerRssMiB.toFixed(0)} / ${last.heapUsedMiB?.toFixed(0) ?? '—'} MiB` : '—',
          String(s.peakQueueDepth),
          `${s.coldCpu.controller} / ${s.coldCpu.apiserver} / ${s.coldCpu.etcd}`,
          s.steadyCpu !== undefined
            ? `${s.steadyCpu.controller} / ${s.steadyCpu.apiserver} / ${s.steadyCpu.etcd}`
            : '—',
          `${s.coldApiWritesPerS.toFixed(0)} / ${s.steadyApiWritesPerS?.toFixed(1) ?? '—'}`,
          reconciles > 0
            ? `${(reconciles / s.locks).toFixed(1)}, ${rec['reconcile_time_mean_ms']?.toFixed(0) ?? '?'} ms`
            : '—',
          String(s.loadAverage.start.one),
        ];
      }),
    ),
    '',
  );
  if (file === 'scale.json') {
    const within = (label: string, size: ScaleSize | undefined, limitS: number): void => {
      if (size === undefined) return;
      const t = size.allGrantedSeconds;
      targets.push([
        label,
        t === undefined ? `not all granted (${size.grantedAtEnd})` : `${t.toFixed(1)} s`,
        t !== undefined && t <= limitS
          ? 'met'
          : t === undefined
            ? 'missed'
            : `missed by ${(t - limitS).toFixed(1)} s (${x(t / limitS)})`,
      ]);
    };
    within(
      '(revised) 1,000 locks from a cold start all granted ≤ 15 s',
      scale.sizes.find((s) => s.locks === 1000),
      15,
    );
    within(
      '(revised) 10,000 locks from a cold start all granted ≤ 120 s',
      scale.sizes.find((s) => s.locks === 10_000),
      120,
    );
    // The steady window opens the moment the last grant is counted, while the controller still
    // writes the last grants' status and Events; its second half shows the renewals alone.
    const steadyWrites = scale.sizes.flatMap((s) => {
      const whole = s.steadyControllerWritesPerLockPerMin;
      const late = secondHalfWritesPerLockPerMin(s);
      return whole === undefined || late === undefined ? [] : [{ locks: s.locks, whole, late }];
    });
    if (steadyWrites.length > 0) {
      const worstLate = Math.max(...steadyWrites.map((w) => w.late));
      targets.push([
        "(revised) steady state: the controller's API writes per held lock per minute = 0 (second half of the steady window)",
        steadyWrites.map((w) => `${w.locks}: ${w.late.toFixed(3)} (whole window ${w.whole.toFixed(3)})`).join('; '),
        worstLate === 0 ? 'met' : `missed: ${worstLate.toFixed(3)}`,
      ]);
    }
    const big = scale.sizes.find((s) => s.locks === 10_000);
    if (big !== undefined)
      targets.push([
        '(revised) 10,000 locks on one replica, peak RSS ≤ 300 MiB (no heap ceiling: V8 sized from the host)',
        `peak ${big.peakRssMiB.toFixed(0)} MiB${big.completed ? '' : ` (${big.grantedAtEnd} granted)`}`,
        big.peakRssMiB <= 300 ? 'met' : `missed by ${(big.peakRssMiB - 300).toFixed(0)} MiB`,
      ]);
  }
}

/** secondHalfWritesPerLockPerMin: the controller's writes per lock per minute over the steady window's second half. */
function secondHalfWritesPerLockPerMin(s: ScaleSize): number | undefined {
  const steady = s.samples.filter((p) => p.phase === 'steady' && p.controllerWrites !== undefined);
  const first = steady[0];
  const last = steady.at(-1);
  if (first === undefined || last === undefined || last.t <= first.t) return undefined;
  const mid = steady.find((p) => p.t >= (first.t + last.t) / 2) ?? first;
  const minutes = (last.t - mid.t) / 60;
  if (minutes <= 0) return undefined;
  return ((last.controllerWrites ?? 0) - (mid.controllerWrites ?? 0)) / s.locks / minutes;
}

interface Redis {
  readonly command: string;
  readonly roundTripMs: Record<string, Stats>;
  readonly throughputPerSecond: Record<string, { perSecond: number }>;
  readonly versions: { redis: string };
}
const redis = read<Redis>('redis-fence.json');
if (redis !== undefined) {
  out.push(`### Redis fencing (\`${redis.command}\`, redis-server ${redis.versions.redis})`, '');
  const rt = redis.roundTripMs;
  out.push(
    table(
      ['', 'p50', 'p90', 'p99', 'max'],
      Object.entries({
        'PING (the floor)': rt['ping'],
        'token: FENCE_NEXT Lua (INCR with a floor)': rt['tokenNext'],
        'guarded write (fenced-write Lua)': rt['guardedWrite'],
      })
        .filter((e): e is [string, Stats] => e[1] !== undefined)
        .map(([k, s]) => [k, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max)]),
    ),
    '',
  );
  const tp = redis.throughputPerSecond;
  out.push(
    `Guard throughput on one connection: ${tp['guardedWrite1InFlight']?.perSecond ?? '?'} writes/s with 1 in flight, ${tp['guardedWrite32InFlight']?.perSecond ?? '?'} with 32 in flight; stale writes rejected at ${tp['staleWrite32InFlight']?.perSecond ?? '?'}/s.`,
    '',
  );
}

interface AgentStats {
  readonly p50: number;
  readonly p90: number;
  readonly max: number;
}
interface AgentSubject {
  readonly label: string;
  readonly summary: Record<string, AgentStats | undefined>;
}
interface Handoff {
  readonly command: string;
  readonly loadAverage?: { readonly start?: { readonly one: number } };
  readonly series: readonly {
    readonly backend: string;
    readonly summary: Record<string, Stats | undefined>;
    readonly models: { readonly protocolFloorKeepAliveMs: number };
  }[];
}
const handoff = read<Handoff>('handoff.json');
if (handoff !== undefined) {
  out.push(
    `### Voluntary handoff, hop by hop (\`${handoff.command}\`${handoff.loadAverage?.start !== undefined ? `, load average ${handoff.loadAverage.start.one} at start` : ''})`,
    '',
    'release CAS → the controller sees the release (watch) → grant CAS sent → the successor sees the grant (watch) → its confirming renew; p50 / p99 in ms. The floor: 3 Lease CAS + 2 watch deliveries on one kept-alive connection, measured in the same run.',
    '',
  );
  const hop = (m: Record<string, Stats | undefined>, k: string): string => {
    const v = m[k];
    return v === undefined ? '—' : `${v.p50.toFixed(1)} / ${v.p99.toFixed(1)}`;
  };
  out.push(
    table(
      [
        'backend',
        'release CAS',
        'release seen',
        'seen → grant sent',
        'grant sent → seen',
        'confirm CAS',
        'release → confirmed',
        'floor (p50)',
      ],
      handoff.series.map((h) => [
        h.backend,
        hop(h.summary, 'releaseCasMs'),
        hop(h.summary, 'releaseSeenMs'),
        hop(h.summary, 'releaseSeenToGrantSentMs'),
        hop(h.summary, 'grantSentToSeenMs'),
        hop(h.summary, 'confirmCasMs'),
        hop(h.summary, 'releaseToConfirmMs'),
        h.models.protocolFloorKeepAliveMs.toFixed(1),
      ]),
    ),
    '',
  );
}

interface Agent {
  readonly command: string;
  readonly loadAverageAtStart?: readonly number[];
  readonly subjects?: Record<string, AgentSubject | undefined>;
  readonly idle?: Record<string, Record<string, AgentStats | undefined> | undefined>;
  readonly sharedAgents?: {
    readonly agents: number;
    readonly totalKiB: { readonly rss: number; readonly pss: number; readonly anon: number; readonly file: number };
  };
}
const agent = read<Agent>('agent-footprint.json');
if (agent?.subjects !== undefined) {
  // One decimal: the private-memory goal is 8 MiB, and 7.5 and 8.4 both round to 8.
  const mib = (k: number | undefined): string => (k === undefined ? '?' : `${(k / 1024).toFixed(1)} MiB`);
  out.push(`### Agent (\`${agent.command}\`, load average at start ${(agent.loadAverageAtStart ?? []).join(' ')})`, '');
  const subjectRows = Object.values(agent.subjects)
    .filter((s): s is AgentSubject => s !== undefined)
    .map((s) => [
      s.label,
      ms(s.summary['readyMs']?.p50),
      ms(s.summary['heldMs']?.p50),
      mib(s.summary['rssKiB']?.p50),
      mib(s.summary['rssKiB']?.max),
      mib(s.summary['anonKiB']?.p50),
      mib(s.summary['fileKiB']?.p50),
    ]);
  const idleRows = Object.entries(agent.idle ?? {}).map(([k, m]) => [
    `idle ${k}, for scale`,
    '',
    '',
    mib(m?.['rssKiB']?.p50),
    mib(m?.['rssKiB']?.max),
    mib(m?.['anonKiB']?.p50),
    mib(m?.['fileKiB']?.p50),
  ]);
  out.push(
    table(
      [
        'p50 unless said',
        'spawn → /readyz 200',
        'spawn → holding',
        'RSS holding',
        'RSS max',
        'of it private (anon)',
        'of it the executable (file)',
      ],
      [...subjectRows, ...idleRows],
    ),
    '',
  );
  const shipped = agent.subjects['shipped']?.summary;
  const rss = ((shipped?.['rssKiB']?.p50 ?? 0) * 1024) / 2 ** 20;
  targets.push([
    '(revised) shipped agent ≤ 40 MiB RSS while holding',
    `${rss.toFixed(1)} MiB`,
    rss <= 40 ? 'met' : `missed by ${(rss - 40).toFixed(1)} MiB (${x(rss / 40)})`,
  ]);
  const anon = (shipped?.['anonKiB']?.p50 ?? Infinity) / 1024;
  targets.push([
    'shipped agent ≤ 8 MiB private (anon) memory while holding',
    `${anon.toFixed(1)} MiB`,
    anon <= 8 ? 'met' : `missed by ${(anon - 8).toFixed(1)} MiB (${x(anon / 8)})`,
  ]);
  const shared = agent.sharedAgents;
  if (shared !== undefined) {
    const t = shared.totalKiB;
    out.push(
      `${shared.agents} shipped agents at once from one executable, each holding its own lock: Pss ${mib(t.pss)} in all ` +
        `(RSS summed ${mib(t.rss)}; their private memory ${mib(t.anon)}, the rest the executable's file pages, counted once).`,
      '',
    );
  }
  const ready = shipped?.['readyMs']?.p50 ?? Infinity;
  targets.push([
    '(revised) shipped agent spawn → ready p50 ≤ 250 ms',
    ms(ready),
    ready <= 250 ? 'met' : `missed by ${(ready - 250).toFixed(0)} ms (${x(ready / 250)})`,
  ]);
}
interface Imports {
  readonly rows: readonly { module: string; rssMiB: number; overBareMiB: number; heapUsedMiB: number }[];
}
const imports = read<Imports>('agent-imports.json');
if (imports !== undefined) {
  out.push("Where the agent's RSS comes from (`node bench/agent-imports.ts`: a fresh node importing one module):", '');
  out.push(
    table(
      ['module', 'RSS', 'over bare node', 'V8 heap used'],
      imports.rows.map((r) => [
        r.module,
        `${r.rssMiB.toFixed(0)} MiB`,
        `+${r.overBareMiB.toFixed(0)} MiB`,
        `${r.heapUsedMiB.toFixed(0)} MiB`,
      ]),
    ),
    '',
  );
}

const report = `## Targets\n\nTargets marked (revised) replace an earlier target for the same figure; the others are the first targets.\n\n${table(['target', 'measured', 'verdict'], targets)}\n\n## Tables\n\n${out.join('\n')}\n`;
if (process.argv.includes('--write')) {
  const doc = resolve(import.meta.dirname, '../docs/benchmarks.md');
  const text = readFileSync(doc, 'utf8');
  const start = text.indexOf('<!-- report:start -->');
  const end = text.indexOf('<!-- report:end -->');
  if (start < 0 || end < start) throw new Error(`${doc} has no <!-- report:start --> … <!-- report:end --> section`);
  writeFileSync(
    doc,
    `${text.slice(0, start)}<!-- report:start -->\n<!-- generated by node bench/report.ts --write; do not edit by hand -->\n\n${report}\n${text.slice(end)}`,
  );
  process.stdout.write(`Updated ${doc}\n`);
} else {
  process.stdout.write(report);
}
