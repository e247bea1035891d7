/**
 * The `exec-tree` fault: the holder does its work through `fencepost exec`, and the command is a
 * process tree — shells under shells, background children, pipelines, some processes ignoring
 * SIGTERM — whose leaves (tree-writer.ts) write to the fenced store with FENCEPOST_TOKEN. When the
 * lock moves on, exec must stop the whole tree before the successor can be granted, and leave no
 * process behind.
 *
 * Set-up: the trial's first holder hands the lock over (its pod unready, its session released)
 * to a third pod C whose "containers" are one real `fencepost-agent exec` process (the shipped executable),
 * which reaches the API server through a TCP proxy of its own and whose tree reaches the store
 * through another; the other worker's pod is unready meanwhile and becomes a candidate again once
 * the tree has written, so that it is the successor. Tree shape and fault are drawn from the seed:
 *
 * - tree: depth 1 (exec → writer), 2 (exec → sh → writers) or 3 (exec → sh → sh → writers), one
 *   to three writers; each shell starts its children in the background and waits, or runs the
 *   last one as a pipeline stage (`… | cat`), or exits early leaving them running (orphans stay in
 *   the group); each shell and writer ignores SIGTERM with probability 1/3.
 * - fault: `partition` (exec's API proxy blackholed: exec reports the loss at its renew deadline
 *   and signals the group); `partition+store-delay` (the tree's store traffic held too, released
 *   after the successor wrote); `pause-exec` (exec alone SIGSTOPped for U[1.5, 3] L — the tree
 *   runs on, as under a starved supervisor — then resumed); a tree whose top shell exits early is
 *   `command-exits` instead (exec stops what it left behind before it releases).
 *
 * The lock's lease is raised to at least EXEC_MIN_LEASE_SECONDS (2 s) before C is granted: exec's
 * grace is half of lease − renew deadline (333 ms at 2 s, 167 ms at 1 s).
 *
 * Counters (each must be 0):
 * - `treeWritesAfterGrant`: writes of the tree the store applied (its command log) that were sent
 *   (the writer's wall clock) after the successor's grant (its Lease version's renewTime, the
 *   controller's wall clock); `treeAttemptsAfterGrant`: such writes sent, applied or refused.
 *   Not counted for `pause-exec`, where the tree runs on while exec cannot act and only the guard
 *   stands between it and the store (S1–S5 still hold);
 * - `treeWritesAfterResume` (`pause-exec`): tree writes sent later than the grace + 1 s after exec
 *   was resumed;
 * - `treeProcessesLeft`: processes of the tree (its process group, and every PID the tree reported)
 *   still alive 200 ms after exec exited; the trial then SIGKILLs them (only processes of a group
 *   whose leader exec started for this trial).
 *
 * Calibration `--calibrate child-only`: exec is child-only-exec.ts, which signals the direct child
 * alone (as exec did before it stopped whole trees); trees deeper than one must then show in these
 * counters.
 *
 * The `exec-handover` fault (execHandover) is the same trial with a planned handover instead of a
 * loss: once the successor-to-be is a candidate again, the lock held by exec is handed over to it
 * as `kubectl fencepost handover` asks (the lock's handover annotation against exec's token), with
 * a drain period of 0 or 1 s. Its trees never exit early at the top (the job runs until stopped)
 * and each writer ignores SIGTERM with probability 2/3 (only SIGKILL stops it). Variants:
 * `handover` (exec holds the trial's lock) and `handover-multi` (exec holds the trial's lock and a
 * second lock `<trial>-x`; the writers use FENCEPOST_TOKEN_<LOCK> of the trial's lock; the handover
 * of one lock must stop the job, then both are released). The same counters must be 0: exec stops
 * the group before it answers the handover, so no tree write is sent after the successor's grant.
 * Calibration `--calibrate no-drain`: exec is no-drain-exec.ts, deaf to the handover (it stops the
 * job only once the release ended the term): the counters must then show writes after the grant.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { agentBinary } from '../../support/agent-binary.ts';
import { tokenEnvName } from '../../../src/cli/exec-flags.ts';
import { askHandover, createLock, createPod, lockBody, setPodStatus } from '../../support/fixtures.ts';
import { startTcpProxy } from '../../support/testbed/tcp-proxy.ts';
import type { LeaseVersion } from '../history.ts';
import { trialPrefix } from '../recorders.ts';
import { parseWorkerOutput } from '../worker-protocol.ts';
import type { Ctx, FaultOutcome, Holder } from '../trial.ts';
import { patchLockSpec, wallMs } from './node-loss.ts';

const CHILD_ONLY_EXEC = resolve(import.meta.dirname, 'child-only-exec.ts');
const NO_DRAIN_EXEC = resolve(import.meta.dirname, 'no-drain-exec.ts');
const WRITER = resolve(import.meta.dirname, 'tree-writer.ts');
/** MARKER: in every tree shell script (a comment line), so a reader of `ps` knows whose they are. */
const MARKER = 'fencepost-safety-exec-tree';
/** MULTI_LABEL: the pod label that makes exec's pod the only candidate of a handover-multi trial's second lock. */
const MULTI_LABEL = 'safety-multi-lock';

/**
 * EXEC_MIN_LEASE_SECONDS: exec-tree trials' lease at least. A `fencepost exec` and its tree cost
 * far more CPU to start than a worker's session; at 1 s under CI load exec lost its first renewals
 * (renew deadline 666 ms) before its tree had written.
 */
export const EXEC_MIN_LEASE_SECONDS = 2;

export const EXEC_TREE_FAULTS = ['partition', 'partition+store-delay', 'pause-exec'] as const;

/** EXEC_HANDOVER_FAULTS: what an exec-handover trial draws (see the header). */
export const EXEC_HANDOVER_FAULTS = ['handover', 'handover', 'handover-multi'] as const;

interface Leaf {
  readonly kind: 'leaf';
  readonly name: string;
  readonly ignoreTerm: boolean;
}
interface Shell {
  readonly kind: 'shell';
  readonly name: string;
  readonly ignoreTerm: boolean;
  readonly children: readonly TreeNode[];
  /** how the shell runs its children: all in the background then `wait`, the last as a pipeline stage, or all in the background then exit. */
  readonly mode: 'wait' | 'pipe' | 'exit-early';
}
type TreeNode = Leaf | Shell;

/**
 * drawTree draws a tree of `depth` levels of processes under exec, with 1–3 writers. `stubborn`
 * (exec-handover): writers ignore SIGTERM with probability 2/3, and the top shell never exits early.
 */
function drawTree(ctx: Ctx, depth: number, stubborn = false): TreeNode {
  let n = 0;
  const ignore = (): boolean => ctx.rnd() < 1 / 3;
  const leaf = (): Leaf => ({ kind: 'leaf', name: `w${++n}`, ignoreTerm: stubborn ? ctx.rnd() < 2 / 3 : ignore() });
  const shell = (d: number, top: boolean): TreeNode => {
    if (d === 1) return leaf();
    const children: TreeNode[] = [shell(d - 1, false)];
    if (ctx.rnd() < 0.5) children.push(leaf());
    return {
      kind: 'shell',
      name: `s${++n}`,
      ignoreTerm: ignore(),
      children,
      // An early exit at the top ends the command itself: one tree in six.
      mode: ctx.pick(
        top
          ? stubborn
            ? (['wait', 'pipe'] as const)
            : (['wait', 'pipe', 'wait', 'pipe', 'wait', 'exit-early'] as const)
          : (['wait', 'pipe', 'exit-early'] as const),
      ),
    };
  };
  return shell(depth, true);
}

/** describeTree: a short label, e.g. `sh(pipe,TERM-ignored)[sh(wait)[w1],w2]`. */
function describeTree(t: TreeNode): string {
  const ign = t.ignoreTerm ? '!' : '';
  return t.kind === 'leaf' ? `w${ign}` : `sh${ign}(${t.mode})[${t.children.map(describeTree).join(',')}]`;
}

/** commandOf: the argv that runs a node (a writer, or `sh <script>`), writing scripts into dir. */
function commandOf(t: TreeNode, dir: string, tokenVar = 'FENCEPOST_TOKEN'): string[] {
  if (t.kind === 'leaf')
    return [
      process.execPath,
      WRITER,
      '--name',
      t.name,
      '--token-var',
      tokenVar,
      ...(t.ignoreTerm ? ['--ignore-term'] : []),
    ];
  const quoted = (argv: string[]): string => argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const kids = t.children.map((c) => quoted(commandOf(c, dir, tokenVar)));
  const lines = [
    `# ${MARKER}`,
    `printf '{"trial":"%s","kind":"tree","holder":"","token":"%s","detail":"%s"}\\n' "$SAFETY_TRIAL" "$${tokenVar}" "$$" >&2`,
    ...(t.ignoreTerm ? [`trap '' TERM`] : []),
  ];
  if (t.mode === 'pipe') {
    for (const k of kids.slice(0, -1)) lines.push(`${k} &`);
    lines.push(`${kids.at(-1) ?? ':'} | cat`, 'wait');
  } else {
    for (const k of kids) lines.push(`${k} &`);
    // exit-early: the shell leaves once its children run (they are orphaned, still in the group).
    lines.push(t.mode === 'wait' ? 'wait' : 'sleep 1; exit 0');
  }
  const script = join(dir, `${t.name}.sh`);
  writeFileSync(script, `${lines.join('\n')}\n`);
  return ['sh', script];
}

/** procState: a process's state letter and process group from /proc (undefined once gone). */
function procState(pid: number): { state: string; pgrp: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

/** groupMembers: the running (not zombie) processes of process group pgid. */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(e)) continue;
    const s = procState(Number(e));
    if (s !== undefined && s.pgrp === pgid && s.state !== 'Z') out.push(Number(e));
  }
  return out;
}

/** live: cleanups of trees not yet stopped, run if the runner exits first. */
const live = new Set<() => void>();
process.on('exit', () => {
  for (const f of live) f();
});

/** execHandover runs one exec-handover trial: execTree with a planned handover as the fault (see the header). */
export function execHandover(ctx: Ctx, h: Holder): Promise<FaultOutcome> {
  return execTree(ctx, h, true);
}

/** execTree runs one exec-tree trial (see the header); h is the trial's first holder, other the successor-to-be. */
export async function execTree(ctx: Ctx, h: Holder, handover = false): Promise<FaultOutcome> {
  const { t } = ctx.bed;
  const id = ctx.spec.id;
  const depth = ctx.pick([1, 2, 3] as const);
  const tree = drawTree(ctx, depth, handover);
  const commandExits = tree.kind === 'shell' && tree.mode === 'exit-early';
  const fault = handover ? ctx.pick(EXEC_HANDOVER_FAULTS) : commandExits ? 'command-exits' : ctx.pick(EXEC_TREE_FAULTS);
  const drainSeconds = handover ? ctx.pick([0, 1] as const) : 0;
  // handover-multi: exec holds a second lock too; the writers fence with the trial lock's token.
  const second = fault === 'handover-multi' ? `${id}-x` : undefined;
  const successorPod = h.pod === `${id}-a` ? `${id}-b` : `${id}-a`;
  const dir = join(ctx.bed.dir, `exec-tree-${id}`);
  mkdirSync(dir, { recursive: true });
  const argv = commandOf(tree, dir, second !== undefined ? tokenEnvName(id) : 'FENCEPOST_TOKEN');
  // exec's term lasts at least EXEC_MIN_LEASE_SECONDS (the lock's spec is raised before C's grant).
  const leaseSeconds = Math.max(ctx.spec.leaseSeconds, EXEC_MIN_LEASE_SECONDS);
  const leaseMs = leaseSeconds * 1000;
  if (leaseSeconds > ctx.spec.leaseSeconds) await patchLockSpec(t, id, 'leaseDurationSeconds', leaseSeconds);
  // Its only candidate is exec's pod (label MULTI_LABEL): the trial's workers never ask for it.
  if (second !== undefined)
    await createLock(
      t,
      lockBody(second, id, {
        leaseDurationSeconds: leaseSeconds,
        candidates: { selector: { matchLabels: { [MULTI_LABEL]: id } } },
      }),
    );

  // The successor-to-be waits unready; C is created and its exec started.
  await setPodStatus(t, successorPod, 'unready');
  const c = await createPod(t, `${id}-c`, { app: id, ...(second !== undefined ? { [MULTI_LABEL]: id } : {}) });
  const cId = `${id}-c/${c.metadata?.uid ?? ''}`;
  const admin = new KubeConfig();
  admin.loadFromFile(ctx.bed.kubeconfigPath);
  const server = new URL(admin.getCurrentCluster()?.server ?? '');
  const apiProxy = await startTcpProxy({ targetPort: Number(server.port) });
  const storeProxy = await startTcpProxy({ targetPort: ctx.bed.store.port });
  const kubeconfig = join(dir, 'exec.kubeconfig');
  writeFileSync(kubeconfig, admin.exportConfig().replace(server.origin, `https://127.0.0.1:${apiProxy.port}`), {
    mode: 0o600,
  });
  const childOnly = ctx.spec.calibrate === 'child-only';
  const noDrain = ctx.spec.calibrate === 'no-drain';
  const out = openSync(join(dir, 'exec.out'), 'a');
  const exec: ChildProcess = spawn(
    childOnly || noDrain ? process.execPath : agentBinary(),
    [
      ...(childOnly ? [CHILD_ONLY_EXEC] : noDrain ? [NO_DRAIN_EXEC] : ['exec']),
      '--kubeconfig',
      kubeconfig,
      '--log-level',
      'info',
      '--lock',
      id,
      ...(second !== undefined ? ['--lock', second] : []),
      '--wait',
      '60s',
      '--',
      ...argv,
    ],
    {
      stdio: ['ignore', out, 'pipe'],
      env: {
        ...process.env,
        POD_NAME: `${id}-c`,
        POD_NAMESPACE: t.namespace,
        POD_UID: c.metadata?.uid ?? '',
        SAFETY_STORE_URL: `redis://127.0.0.1:${storeProxy.port}`,
        SAFETY_TRIAL: id,
        SAFETY_PREFIX: trialPrefix(id),
      },
    },
  );
  closeSync(out);
  let execExitAt: number | undefined;
  const execExited = new Promise<void>((r) => {
    exec.on('exit', () => {
      execExitAt = performance.now();
      r();
    });
    exec.on('error', () => {
      execExitAt = performance.now();
      r();
    });
  });
  const pids = new Set<number>();
  let pgid: number | undefined;
  let token: bigint | undefined;
  const sentAt = new Map<string, number>();
  let firstAccepted: (() => void) | undefined;
  const accepted = new Promise<void>((r) => {
    firstAccepted = r;
  });
  const log: string[] = [];
  const stderrEnded = new Promise<void>((r) => {
    exec.stderr?.on('end', r).on('error', () => {
      r();
    });
  });
  if (exec.stderr === null) throw new Error('exec-tree: no stderr pipe');
  createInterface({ input: exec.stderr }).on('line', (line) => {
    const at = performance.now();
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      log.push(line);
      return;
    }
    if (o['trial'] !== id) {
      // exec's own log line
      log.push(line);
      // The tree's belief ends when exec has stopped it: on a loss when exec says so; in a
      // handover once the group is gone (exec's answer), before the release.
      const msg = o['msg'];
      if (
        typeof msg === 'string' &&
        (msg.startsWith('Lost lock') || msg.startsWith('Command stopped for the handover')) &&
        token !== undefined
      )
        ctx.events.push({ kind: 'lost', at, holder: cId, token });
      return;
    }
    const kind = o['kind'];
    if (kind === 'tree') {
      const pid = Number(o['detail']);
      pids.add(pid);
      if (pgid === undefined) pgid = procState(pid)?.pgrp;
      if (token === undefined && typeof o['token'] === 'string') {
        token = BigInt(o['token']);
        ctx.events.push({ kind: 'granted', at, holder: cId, token });
      }
      return;
    }
    if (kind === 'attempt' && typeof o['writeId'] === 'string' && typeof o['sentAt'] === 'number')
      sentAt.set(o['writeId'], o['sentAt']);
    const w = parseWorkerOutput(line);
    if (w !== undefined) ctx.record({ ...w, at });
    if (kind === 'outcome' && o['result'] === 'accepted') firstAccepted?.();
  });
  const killTree = (): void => {
    if (pgid !== undefined && pgid > 1)
      for (const pid of groupMembers(pgid))
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
    for (const pid of pids)
      if (procState(pid)?.pgrp === pgid)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
  };
  const cleanup = (): void => {
    if (exec.exitCode === null && exec.signalCode === null) {
      exec.kill('SIGCONT');
      exec.kill('SIGKILL');
    }
    killTree();
  };
  live.add(cleanup);

  let startAt: number;
  let resumedWall: number | undefined;
  let treeProcessesLeft = 0;
  try {
    // Hand the lock to C: the first holder leaves and its pod stops being a candidate.
    await ctx.handOff(h.w, h.id);
    await Promise.race([
      accepted,
      execExited.then(() => {
        throw new Error(`exec exited before its tree wrote: ${log.slice(-5).join(' | ')}`);
      }),
      sleep(60_000).then(() => {
        throw new Error(`no write of the tree accepted within 60 s: ${log.slice(-5).join(' | ')}`);
      }),
    ]);
    const cToken = token ?? 0n;
    await setPodStatus(t, successorPod, 'ready');
    if (fault === 'command-exits') {
      startAt = performance.now();
      await Promise.race([execExited, sleep(20_000)]);
      await setPodStatus(t, `${id}-c`, 'unready').catch(() => undefined);
    } else if (fault === 'pause-exec') {
      await sleep(ctx.uniform(0, leaseMs / 2));
      exec.kill('SIGSTOP');
      startAt = performance.now();
      ctx.note('paused', cId);
      await sleep(ctx.uniform(1.5, 3) * leaseMs);
      resumedWall = performance.timeOrigin + performance.now();
      exec.kill('SIGCONT');
      ctx.note('resumed', cId);
    } else if (fault === 'handover' || fault === 'handover-multi') {
      // Mid-write: the writers write every 100 ms; the request lands anywhere in that cycle.
      await sleep(ctx.uniform(0, leaseMs / 2));
      startAt = performance.now();
      await askHandover(t, id, successorPod, cToken, { drainSeconds, by: 'safety-suite' });
    } else {
      await sleep(ctx.uniform(0, leaseMs / 2));
      apiProxy.blackhole();
      if (fault === 'partition+store-delay') storeProxy.blackhole();
      startAt = performance.now();
    }
    await ctx.progress(cToken, 30_000);
    storeProxy.heal();
    await Promise.race([execExited, sleep(15_000)]);
    apiProxy.heal();
    await sleep(200);
    treeProcessesLeft = new Set([
      ...(pgid !== undefined ? groupMembers(pgid) : []),
      ...[...pids].filter((p) => {
        const s = procState(p);
        return s !== undefined && s.state !== 'Z' && s.pgrp === pgid;
      }),
    ]).size;
    if (execExitAt === undefined) throw new Error(`exec did not exit within 15 s of the successor's write`);
  } finally {
    cleanup();
    live.delete(cleanup);
    apiProxy.heal();
    storeProxy.heal();
    await Promise.race([execExited, sleep(5000)]);
    await Promise.race([stderrEnded, sleep(2000)]);
    if (execExitAt !== undefined) ctx.events.push({ kind: 'left', at: execExitAt, holder: cId });
    await Promise.allSettled([apiProxy.close(), storeProxy.close()]);
  }
  const cToken = token ?? 0n;
  const grace = Math.floor((leaseMs - Math.floor((leaseMs * 2) / 3)) / 2);
  return {
    variant: `${fault}${handover ? ` (drain ${drainSeconds} s)` : ''} ${describeTree(tree)}`,
    faultMs: performance.now() - startAt,
    startAt,
    above: cToken,
    tally: (leases: readonly LeaseVersion[]) => {
      const byRv = [...leases].sort((a, b) => (a.resourceVersion < b.resourceVersion ? -1 : 1));
      const grant = byRv.find(
        (v) => v.holder !== undefined && v.holder !== cId && v.token !== undefined && v.token > cToken,
      );
      const grantWall = grant?.renewTime !== undefined ? wallMs(grant.renewTime) : Infinity;
      const applied = new Set(
        ctx.bed.storeLog
          .applies(id)
          .filter((a) => a.writer === cId)
          .map((a) => a.writeId),
      );
      const after = [...sentAt].filter(([, at]) => at > grantWall);
      const counted = fault !== 'pause-exec';
      return {
        treeWritesAfterGrant: counted ? after.filter(([w]) => applied.has(w)).length : 0,
        treeAttemptsAfterGrant: counted ? after.length : 0,
        treeWritesAfterResume:
          resumedWall !== undefined ? [...sentAt.values()].filter((at) => at > resumedWall + grace + 1000).length : 0,
        treeProcessesLeft,
      };
    },
  };
}
