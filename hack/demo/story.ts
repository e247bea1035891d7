/**
 * The demo's story: a real control plane, Redis and the controller; two pods with an agent each;
 * a worker per pod writing to a Redis "ledger" while its agent says it holds the lock; then the
 * holder freezes (SIGSTOP of its worker and agent) between its check and its write, for twice
 * the lease — once with the fencing guard, once without.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION } from '../../src/api/v1alpha1/distributedlock.ts';
import type { Redis } from 'ioredis';
import { startLockController } from '../../src/controllers/distributedlock/setup.ts';
import { parseLease, type LockRecord } from '../../src/lease/record.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { realClock } from '../../src/runtime/clock.ts';
import { createLock, createPod, getLease, lockBody, testKube, type TestKube } from '../../test/support/fixtures.ts';
import { startControlPlane, type ControlPlane } from '../../test/support/testbed/control-plane.ts';
import { waitHealthy } from '../../test/support/testbed/http-probe.ts';
import { freePort } from '../../test/support/testbed/ports.ts';
import { spawnManaged, type ManagedProcess } from '../../test/support/testbed/processes.ts';
import { startRedis, type RedisServer } from '../../test/support/testbed/redis.ts';
import type { CheckedEvent, StateEvent, WorkerEvent, WriteEvent } from './events.ts';
import { actSummary, type ActSummary, type DemoSummary, type DemoWrite, type Grant } from './summary.ts';
import type { Timeline } from './timeline.ts';
import { startWorker, type WorkerProcess } from './worker-process.ts';
import { leaseName } from '../../src/protocol/names.ts';

const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

/** The names the story uses. */
export const NAMESPACE = 'fencepost-demo';
export const LOCK = 'billing';
export const LEDGER = 'ledger';
const PODS = ['worker-a', 'worker-b'] as const;
const LEASE_SECONDS = 2;
/** PAUSE_MS: how long the holder stays frozen — twice the lease. */
const PAUSE_MS = 2 * LEASE_SECONDS * 1000;
/** WAIT_MS bounds every wait for something the story expects (it only catches hangs). */
const WAIT_MS = 20_000;

/** Cleanups collects what to stop, in the order things were started; they are run in reverse. */
export interface Cleanups {
  add(name: string, stop: () => Promise<void> | void): void;
}

/** DemoPod is one of the two pods: its name and UID, its agent's port and process. */
export interface DemoPod {
  readonly name: string;
  readonly uid: string;
  readonly port: number;
  readonly agent: ManagedProcess;
}

/**
 * DemoTestbed is what setup() started, for a caller that runs its own story on it (the race page,
 * hack/race/): the pods and their agents, Redis, and a client of it for reading the ledger.
 */
export interface DemoTestbed {
  readonly pods: readonly DemoPod[];
  readonly redisUrl: string;
  readonly ledger: Redis;
  readonly leaseSeconds: number;
  /** logDir: where worker and agent logs go. */
  readonly logDir: string;
}

/** LeaseListener is told the lock's Lease at every poll (undefined: no Lease yet). */
export type LeaseListener = (rec: LockRecord | undefined) => void;

/** ActState is the bookkeeping of one act, fed by the workers' events. */
interface ActState {
  readonly guard: boolean;
  readonly writes: DemoWrite[];
  maxAccepted: bigint | undefined;
  /** narrated: (pod, token) pairs whose first accepted write was narrated. */
  readonly narrated: Set<string>;
  /** sawHeld: pods whose worker saw its agent holding the lock in this act. */
  readonly sawHeld: Set<string>;
}

/** waitFor polls probe until it returns a value; throws after timeoutMs naming what it waited for. */
async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = WAIT_MS): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`Timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(10);
  }
}

const isChecked = (e: WorkerEvent): e is CheckedEvent => e.type === 'checked';

/** Demo runs the story; construct it, then setup(), act(true), act(false), summary(). */
export class Demo {
  readonly #tl: Timeline;
  readonly #dir: string;
  readonly #cleanups: Cleanups;
  #plane: ControlPlane | undefined;
  #redis: RedisServer | undefined;
  #ledger: Redis | undefined;
  readonly #pods = new Map<string, DemoPod>();
  readonly #grants: Grant[] = [];
  #withGuard: ActSummary | undefined;
  #withoutGuard: ActSummary | undefined;
  readonly #leaseListeners = new Set<LeaseListener>();

  constructor(tl: Timeline, dir: string, cleanups: Cleanups) {
    this.#tl = tl;
    this.#dir = dir;
    this.#cleanups = cleanups;
  }

  get #p(): Timeline['paint'] {
    return this.#tl.paint;
  }

  /** setup starts the servers, the controller, the pods' agents, and creates the lock. */
  async setup(assets: string): Promise<void> {
    const tl = this.#tl;
    const p = this.#p;
    tl.step(`Starting etcd, kube-apiserver and redis-server on 127.0.0.1 ${p.dim(`(binaries in ${assets})`)}`);
    const [planeR, redisR] = await Promise.allSettled([
      startControlPlane({ dir: join(this.#dir, 'control-plane') }),
      startRedis({ dir: join(this.#dir, 'redis') }),
    ]);
    if (planeR.status === 'fulfilled') this.#cleanups.add('control plane', () => planeR.value.stop());
    if (redisR.status === 'fulfilled') this.#cleanups.add('redis-server', () => redisR.value.stop());
    if (planeR.status === 'rejected') throw planeR.reason;
    if (redisR.status === 'rejected') throw redisR.reason;
    const plane = planeR.value;
    const redis = redisR.value;
    this.#plane = plane;
    this.#redis = redis;
    const ledger = redis.client();
    ledger.on('error', () => undefined);
    this.#ledger = ledger;
    this.#cleanups.add('ledger client', () => {
      ledger.disconnect();
    });
    tl.step(`Control plane ready at ${plane.apiServer.url} (CRDs installed); redis-server at ${redis.url}`);

    const kc = plane.kubeConfig();
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    const t = testKube(kc, NAMESPACE);
    await this.#crdServing(t);
    const controller = await startLockController({
      kc,
      redisUrl: redis.url,
      namespace: NAMESPACE,
      identity: 'demo-controller',
      clock: realClock,
      log: createLogger('error', { component: 'controller' }),
    });
    this.#cleanups.add('controller', () => controller.stop());
    tl.step(
      'Started the fencepost controller (in this process): it grants the lock and draws fencing tokens from Redis',
    );

    const created = await Promise.all(PODS.map((name) => createPod(t, name, { app: LOCK })));
    tl.step(
      `Created two pods, ${p.pod('worker-a')} and ${p.pod('worker-b')}, in namespace ${NAMESPACE}, marked Ready (label app=${LOCK})`,
    );

    // The agents run before the lock exists, so that the first holder confirms its grant at once.
    mkdirSync(join(this.#dir, 'logs'), { recursive: true });
    await Promise.all(
      created.map(async (pod) => {
        const name = pod.metadata?.name ?? '';
        const uid = pod.metadata?.uid ?? '';
        const port = await freePort();
        const agent = spawnManaged(`agent-${name}`, process.execPath, {
          args: [
            MAIN,
            'agent',
            '--lock',
            LOCK,
            '--listen',
            `127.0.0.1:${port}`,
            '--health-probe-bind-address=0',
            '--metrics-bind-address=0',
            '--kubeconfig',
            plane.kubeconfigPath,
            '--log-level',
            'info',
          ],
          logFile: join(this.#dir, 'logs', `agent-${name}.log`),
          env: { ...process.env, POD_NAME: name, POD_NAMESPACE: NAMESPACE, POD_UID: uid },
        });
        this.#cleanups.add(`agent of ${name}`, () => agent.stop());
        this.#pods.set(name, { name, uid, port, agent });
        await waitHealthy(`http://127.0.0.1:${port}/readyz`, {
          timeoutMs: 30_000,
          alive: () => agent.isRunning(),
          what: `the agent of ${name} (log: ${agent.logFile})`,
        });
      }),
    );
    const pids = PODS.map((n) => `${n} ${this.#pod(n).agent.pid}`).join(', ');
    tl.step(
      `Started a fencepost agent per pod (pids: ${pids}): it renews its pod's lease and answers GET /v1/locks/${LOCK} on localhost`,
    );

    this.#watchGrants(t);
    await createLock(t, lockBody(LOCK, LOCK, { leaseDurationSeconds: LEASE_SECONDS, fencing: { backend: 'Redis' } }));
    tl.step(
      `Created DistributedLock ${LOCK}: candidates app=${LOCK}, lease ${LEASE_SECONDS} s (renewed every 0.7 s), fencing tokens from Redis`,
    );
    await waitFor('the first grant', () => this.#grants[0]);
  }

  /**
   * act runs one pause: workers start (guarded or plain writes); the holder's worker is frozen
   * right after it checked its agent, together with the agent, for PAUSE_MS; the lock moves on;
   * the frozen pair resumes and the worker finishes its write with the token it saw.
   */
  async act(guard: boolean): Promise<ActSummary> {
    const tl = this.#tl;
    const p = this.#p;
    const redis = this.#need(this.#redis, 'redis');
    tl.heading(
      guard
        ? `Act 1 — a ${PAUSE_MS / 1000} s pause, with the fencing guard`
        : 'Act 2 — the same pause, without the guard',
    );
    const act: ActState = { guard, writes: [], maxAccepted: undefined, narrated: new Set(), sawHeld: new Set() };
    const workers = new Map<string, WorkerProcess>();
    for (const name of PODS) {
      const w = startWorker({
        pod: name,
        agentPort: this.#pod(name).port,
        redisUrl: redis.url,
        lock: LOCK,
        key: LEDGER,
        fenced: guard,
        logFile: join(this.#dir, 'logs', `worker-${name}-${guard ? 'guarded' : 'plain'}.log`),
      });
      this.#cleanups.add(`worker of ${name}`, () => w.stop());
      w.onEvent((e) => {
        this.#onWorkerEvent(act, e);
      });
      workers.set(name, w);
    }
    const how = guard
      ? 'through the Redis guard (a Lua script that refuses a token below the highest it has seen)'
      : 'with a plain SET (the --no-fencing mode)';
    tl.step(
      `Started a worker per pod (pids: ${PODS.map((n) => `${n} ${workers.get(n)?.pid ?? '?'}`).join(', ')}): while its agent says held, it writes "written by <pod> with token <token>" to "${LEDGER}" every 200 ms, ${how}`,
    );

    // The current holder writes a few times first.
    const start = await waitFor('the holder to write to the ledger', () => {
      const g = this.#grants.at(-1);
      if (g === undefined) return undefined;
      const n = act.writes.filter((w) => w.pod === g.holder && w.token === g.token && w.accepted).length;
      return n >= 2 ? g : undefined;
    });
    const held = this.#pod(start.holder);
    const other = this.#pod(PODS.find((n) => n !== held.name) ?? '');
    const heldWorker = this.#need(workers.get(held.name), 'worker');

    // Freeze the holder between its check and its write. The worker waits 150 ms between the
    // two; if the SIGSTOP came too late (the write line arrived anyway), resume and try again.
    let checked: CheckedEvent | undefined;
    for (let attempt = 1; checked === undefined; attempt++) {
      const c = await heldWorker.next(isChecked, 5000, `${held.name} to check its agent`);
      heldWorker.signal('SIGSTOP');
      held.agent.signal('SIGSTOP');
      await sleep(80);
      if (!heldWorker.events.some((e) => e.type === 'write' && e.seq === c.seq)) {
        checked = c;
        break;
      }
      held.agent.signal('SIGCONT');
      heldWorker.signal('SIGCONT');
      if (attempt >= 5) throw new Error(`Could not freeze ${held.name} between its check and its write`);
    }
    const pausedAt = performance.now();
    const pausedAtS = tl.elapsed();
    tl.step(
      `${p.pod(held.name)} asked its agent (held, token ${checked.token}) and is about to write — ${p.bold('SIGSTOP')} to its worker and its agent: a ${PAUSE_MS / 1000} s "GC pause", twice the lease`,
    );

    const grant = await waitFor(`${other.name} to be granted the lock`, () =>
      this.#grants.find((g) => g.at >= pausedAtS && g.holder === other.name),
    );
    await waitFor(`${other.name} to write with token ${grant.token}`, () =>
      act.writes.find((w) => w.pod === other.name && w.token === grant.token && w.accepted),
    );
    const left = pausedAt + PAUSE_MS - performance.now();
    if (left > 0) await sleep(left);

    const woke = heldWorker.next(
      (e): e is WriteEvent => e.type === 'write' && e.seq === checked.seq,
      10_000,
      `the write ${held.name} had started`,
    );
    const lost = heldWorker.next(
      (e): e is StateEvent => e.type === 'state' && !e.held && e.state !== 'unreachable',
      10_000,
      `${held.name}'s agent to report the loss`,
    );
    held.agent.signal('SIGCONT');
    heldWorker.signal('SIGCONT');
    const pauseSeconds = (performance.now() - pausedAt) / 1000;
    tl.step(
      `${p.bold('SIGCONT')} ${p.pod(held.name)} after ${pauseSeconds.toFixed(1)} s: it still believes it holds token ${checked.token} and finishes the write it had started`,
    );
    const stale = await woke;
    const afterWake = stale.accepted ? stale.value : await this.#need(this.#ledger, 'ledger').get(LEDGER);
    if (stale.accepted) {
      tl.step(
        `The ledger now says ${q(afterWake)}: ${p.red(`${p.pod(other.name)}'s newer write with token ${grant.token} is gone, and nothing reported an error`)}`,
      );
    } else {
      tl.step(`The ledger still says ${q(afterWake)}: ${p.green(`the newest holder's write survived`)}`);
    }
    await lost;
    const quietFrom = act.writes.length;
    await sleep(1000);
    const later = act.writes.slice(quietFrom);
    const otherWrites = later.filter((w) => w.pod === other.name && w.accepted).length;
    const heldWrites = later.filter((w) => w.pod === held.name).length;
    tl.step(
      `In the next second ${p.pod(other.name)} wrote ${otherWrites} more times with token ${grant.token}; ${p.pod(held.name)} wrote ${heldWrites === 0 ? 'nothing' : `${heldWrites} times`}`,
    );

    await Promise.all([...workers.values()].map((w) => w.stop()));
    const finalLedger = await this.#need(this.#ledger, 'ledger').get(LEDGER);
    const summary = actSummary({
      guard,
      pausedPod: held.name,
      pausedToken: checked.token,
      newHolder: other.name,
      newToken: grant.token,
      pauseSeconds: Number(pauseSeconds.toFixed(2)),
      latestToken: this.#grants.at(-1)?.token ?? '',
      writes: act.writes,
      ledgerAfterWake: afterWake,
      finalLedger,
    });
    if (guard) this.#withGuard = summary;
    else this.#withoutGuard = summary;
    return summary;
  }

  /** summary is the run's result; call after both acts. */
  summary(): DemoSummary {
    return {
      namespace: NAMESPACE,
      lock: LOCK,
      tokensIssued: [...this.#grants],
      withGuard: this.#need(this.#withGuard, 'act 1'),
      withoutGuard: this.#need(this.#withoutGuard, 'act 2'),
      elapsedSeconds: Number(this.#tl.elapsed().toFixed(1)),
    };
  }

  /** testbed is what setup() started; call after setup. */
  testbed(): DemoTestbed {
    return {
      pods: PODS.map((n) => this.#pod(n)),
      redisUrl: this.#need(this.#redis, 'redis').url,
      ledger: this.#need(this.#ledger, 'ledger'),
      leaseSeconds: LEASE_SECONDS,
      logDir: join(this.#dir, 'logs'),
    };
  }

  /**
   * onLease calls listener with the lock's Lease at every poll of the grant watcher (every 50 ms,
   * from setup on), until the returned function is called. The listener must not throw.
   */
  onLease(listener: LeaseListener): () => void {
    this.#leaseListeners.add(listener);
    return () => {
      this.#leaseListeners.delete(listener);
    };
  }

  /** keepInstructions tells a person how to look at the testbed left running. */
  keepInstructions(kubectlDir: string | undefined): string {
    const plane = this.#need(this.#plane, 'control plane');
    const redis = this.#need(this.#redis, 'redis');
    const agents = PODS.map((n) => `  curl -s http://127.0.0.1:${this.#pod(n).port}/v1/locks/${LOCK}   # ${n}'s agent`);
    return [
      'The testbed keeps running (the controller and both agents too). Press Ctrl-C here to stop it all.',
      'In another shell:',
      '',
      `  export KUBECONFIG=${plane.kubeconfigPath}`,
      `  export FENCEPOST_REDIS_URL=${redis.url}`,
      ...(kubectlDir !== undefined ? [`  export PATH=${kubectlDir}:$PATH`] : []),
      `  kubectl -n ${NAMESPACE} get dlock ${LOCK} -o wide`,
      `  kubectl -n ${NAMESPACE} get lease ${leaseName(LOCK)} -o yaml`,
      ...agents,
      `  redis-cli -p ${redis.port} get ${LEDGER}`,
      '',
    ].join('\n');
  }

  /** #crdServing waits until DistributedLocks can be listed (a new CRD's storage answers 429 for a moment). */
  async #crdServing(t: TestKube): Promise<void> {
    const deadline = performance.now() + 30_000;
    for (;;) {
      try {
        await t.custom.listNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: NAMESPACE,
          plural: PLURAL,
        });
        return;
      } catch (err) {
        if (performance.now() > deadline) throw new Error('DistributedLocks cannot be listed', { cause: err });
      }
      await sleep(100);
    }
  }

  #pod(name: string): DemoPod {
    return this.#need(this.#pods.get(name), `pod ${name}`);
  }

  #need<T>(v: T | undefined, what: string): T {
    if (v === undefined) throw new Error(`Demo: ${what} is not set up`);
    return v;
  }

  /** #watchGrants polls the lock's Lease and records (and narrates) every new token. */
  #watchGrants(t: TestKube): void {
    let stopped = false;
    const loop = (async () => {
      let lastToken: string | undefined;
      let lastHolder: string | undefined;
      while (!stopped) {
        try {
          const lease = await getLease(t, LOCK);
          const rec = lease !== undefined ? parseLease(lease) : undefined;
          for (const l of this.#leaseListeners) l(rec);
          const token = rec?.token?.toString();
          const holder = rec?.holder?.name;
          if (holder !== undefined && token !== undefined && token !== lastToken) {
            this.#grants.push({ token, holder, at: Number(this.#tl.elapsed().toFixed(2)) });
            const p = this.#p;
            this.#tl.step(
              lastHolder === undefined
                ? `Controller granted ${LOCK} to ${p.pod(holder)}: fencing token ${p.bold(token)}`
                : `Controller: ${p.pod(lastHolder)}'s lease went ${LEASE_SECONDS} s without a renewal and expired; it granted ${LOCK} to ${p.pod(holder)}: fencing token ${p.bold(token)}`,
            );
            lastToken = token;
            lastHolder = holder;
          }
        } catch {
          /* the API server is going away, or a blip: poll again */
        }
        await sleep(50);
      }
    })();
    this.#cleanups.add('lease watcher', async () => {
      stopped = true;
      await loop;
    });
  }

  #onWorkerEvent(act: ActState, e: WorkerEvent): void {
    const tl = this.#tl;
    const p = this.#p;
    const who = p.pod(e.pod);
    switch (e.type) {
      case 'state':
        if (e.held) {
          act.sawHeld.add(e.pod);
          tl.step(`${who}'s agent says: held, token ${e.token ?? '?'}`);
        } else if (act.sawHeld.has(e.pod) && e.state !== 'unreachable') {
          act.sawHeld.delete(e.pod);
          tl.step(
            `${who}'s agent says: ${p.bold(e.state)} (its term ran out while it was frozen); ${who} stops writing`,
          );
        } else if (
          !act.sawHeld.has(e.pod) &&
          e.state !== 'unreachable' &&
          e.state !== 'confirming' &&
          e.holder !== undefined &&
          e.holder !== e.pod
        ) {
          tl.step(`${who}'s agent says: not held (${e.state}), ${p.pod(e.holder)} holds the lock; ${who} waits`);
        }
        return;
      case 'checked':
        return;
      case 'error':
        tl.step(p.red(`${who}'s write failed: ${e.message}`));
        return;
      case 'write': {
        const token = BigInt(e.token);
        const stale = !e.accepted || (act.maxAccepted !== undefined && token < act.maxAccepted);
        act.writes.push({
          at: Number(tl.elapsed().toFixed(2)),
          pod: e.pod,
          token: e.token,
          accepted: e.accepted,
          stale,
          ...(e.highWater !== undefined ? { highWater: e.highWater } : {}),
          ...(e.previous !== undefined ? { previous: e.previous } : {}),
        });
        if (e.accepted && (act.maxAccepted === undefined || token > act.maxAccepted)) act.maxAccepted = token;
        if (!e.accepted) {
          tl.step(
            `${who}'s write with token ${e.token}: ${p.green(p.bold('REJECTED'))} by the guard — stale fencing token ${e.token} < ${e.highWater ?? '?'}`,
          );
        } else if (stale) {
          tl.step(
            `${who}'s write with token ${e.token}: ${p.red(p.bold('ACCEPTED'))} — a plain SET cannot tell it is stale; it overwrote ${q(e.previous ?? null)}`,
          );
        } else if (!act.narrated.has(`${e.pod}/${e.token}`)) {
          act.narrated.add(`${e.pod}/${e.token}`);
          tl.step(
            `${who} wrote the ledger with token ${e.token}: accepted ${p.dim('(and keeps writing every 200 ms)')}`,
          );
        }
        return;
      }
    }
  }
}

function q(v: string | null): string {
  return v === null ? '(empty)' : `"${v}"`;
}
