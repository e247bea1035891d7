/**
 * The command line of `fencepost exec` (src/cli/exec.ts), read into typed options, and the
 * command's environment: pure, so that every refusal is a unit test. Each problem is a UsageError
 * naming the flag and the value (exit 2).
 */
import { parseDuration } from '../config/duration.ts';
import { parseFlags } from '../config/flags.ts';
import { parseLogLevel, type LogLevel } from '../config/log-level.ts';
import { UsageError } from '../config/usage-error.ts';
import { isDnsLabel } from '../protocol/names.ts';
import { checkTtl } from '../stores/redis/timing.ts';
import { parseStoreUrl, StoreUrlError } from '../stores/url.ts';

/**
 * ExecIfHeld: what exec does when another pod holds a lock. `wait` (default, what exec always
 * did): ask and wait, bounded by --wait. `skip`: exit EXIT_SKIPPED without running the command.
 * `fail`: exit EXIT_NOT_ACQUIRED without running it.
 */
export type ExecIfHeld = 'wait' | 'skip' | 'fail';

const IF_HELD: readonly ExecIfHeld[] = ['wait', 'skip', 'fail'];

/** ExecOptions: the command line, checked. */
export interface ExecOptions {
  /** locks: as given (exec acquires them in the global order of client/lock-order.ts). */
  readonly locks: readonly string[];
  readonly waitMs: number | undefined;
  readonly ifHeld: ExecIfHeld;
  readonly runId: string | undefined;
  readonly graceMs: number | undefined;
  readonly kubeconfig: string | undefined;
  /** store: a Redis or Redlock store URL (checked): hold the locks there, not on Leases (docs/stores.md). */
  readonly store: string | undefined;
  /** ttlMs: the store lock's TTL (--ttl; --store only). */
  readonly ttlMs: number | undefined;
  /** namespace: the store lock's namespace (--namespace; --store only; default `default`). */
  readonly namespace: string | undefined;
  readonly logLevel: LogLevel;
  /** command: CMD and its arguments (at least CMD). */
  readonly command: readonly [string, ...string[]];
}

/** EXEC_SYNOPSIS is the usage line named in errors about the command line's shape. */
const EXEC_SYNOPSIS = 'usage: fencepost exec --lock NAME [--lock NAME...] -- CMD [ARGS...]';

/** parseExecArgs reads exec's argv (the words after `exec`); throws UsageError naming the flag. */
export function parseExecArgs(argv: readonly string[]): ExecOptions {
  const dash = argv.indexOf('--');
  const [cmd, ...args] = dash < 0 ? [] : argv.slice(dash + 1);
  if (cmd === undefined) throw new UsageError('--', `missing, or no command after it; ${EXEC_SYNOPSIS}`);
  const values = parseFlags(argv.slice(0, dash), {
    lock: { type: 'string', multiple: true },
    wait: { type: 'string' },
    'if-held': { type: 'string', default: 'wait' },
    'run-id': { type: 'string' },
    grace: { type: 'string' },
    kubeconfig: { type: 'string' },
    store: { type: 'string' },
    ttl: { type: 'string' },
    namespace: { type: 'string' },
    'log-level': { type: 'string', default: 'error' },
  });
  const locks = values.lock ?? [];
  if (locks.length === 0) throw new UsageError('--lock', 'required');
  for (const l of locks) if (l === '') throw new UsageError('--lock', 'must not be empty');
  const seen = new Set<string>();
  for (const l of locks) {
    if (seen.has(l)) throw new UsageError('--lock', `${JSON.stringify(l)} is given twice`);
    seen.add(l);
  }
  const clash = tokenEnvClash(locks);
  if (clash !== undefined)
    throw new UsageError(
      '--lock',
      `${JSON.stringify(clash[0])} and ${JSON.stringify(clash[1])} would both set ${tokenEnvName(clash[0])}; give locks whose names differ in more than case and punctuation`,
    );
  const ifHeld = values['if-held'];
  if (!(IF_HELD as readonly string[]).includes(ifHeld))
    throw new UsageError('--if-held', `must be wait, skip or fail, got ${JSON.stringify(ifHeld)}`);
  const runId = values['run-id'];
  if (runId !== undefined && locks.length > 1)
    throw new UsageError('--run-id', `takes one --lock (a run is recorded on one lock's Lease), got ${locks.length}`);
  const store = checkStore(values.store, {
    runId,
    kubeconfig: values.kubeconfig,
    ttl: values.ttl,
    namespace: values.namespace,
  });
  return {
    locks,
    store,
    ttlMs: values.ttl !== undefined ? ttlOf(values.ttl) : undefined,
    namespace: values.namespace,
    waitMs: values.wait !== undefined ? parseDuration(values.wait, '--wait') : undefined,
    ifHeld: ifHeld as ExecIfHeld,
    runId,
    graceMs: values.grace !== undefined ? parseDuration(values.grace, '--grace') : undefined,
    kubeconfig: values.kubeconfig,
    logLevel: parseLogLevel(values['log-level']),
    command: [cmd, ...args],
  };
}

/**
 * checkStore: --store's URL, parsed to refuse a bad one now (exit 2), and the flags that go with
 * it or against it. A store lock is no Lease: --run-id (recorded on the Lease) and --kubeconfig
 * cannot work with it; --ttl and --namespace only mean something with it.
 */
function checkStore(
  store: string | undefined,
  other: {
    runId?: string | undefined;
    kubeconfig?: string | undefined;
    ttl?: string | undefined;
    namespace?: string | undefined;
  },
): string | undefined {
  if (store === undefined) {
    if (other.ttl !== undefined)
      throw new UsageError('--ttl', 'only with --store (a Lease lock takes its timings from the DistributedLock)');
    if (other.namespace !== undefined)
      throw new UsageError('--namespace', "only with --store (a Lease lock is in the pod's namespace, POD_NAMESPACE)");
    return undefined;
  }
  try {
    parseStoreUrl(store, '--store');
  } catch (err) {
    if (err instanceof StoreUrlError) throw new UsageError('--store', err.problem);
    throw err;
  }
  if (other.runId !== undefined)
    throw new UsageError('--run-id', 'not with --store: a completed run is recorded on a Kubernetes Lease');
  if (other.kubeconfig !== undefined)
    throw new UsageError('--kubeconfig', 'not with --store: a store lock needs no Kubernetes');
  if (other.namespace !== undefined && !isDnsLabel(other.namespace))
    throw new UsageError(
      '--namespace',
      `must be a DNS label (a-z, 0-9, -; at most 63), got ${JSON.stringify(other.namespace)}`,
    );
  return store;
}

/** ttlOf reads --ttl: a duration in [300ms, 24h]. */
function ttlOf(text: string): number {
  const ms = parseDuration(text, '--ttl');
  try {
    return checkTtl(ms, '--ttl');
  } catch (err) {
    if (err instanceof RangeError)
      throw new UsageError('--ttl', `must be from 300ms to 24h, got ${JSON.stringify(text)}`);
    throw err;
  }
}

/**
 * tokenEnvName is the variable that carries a lock's token to the command: FENCEPOST_TOKEN_ and
 * the lock name upper-cased, every character but A–Z and 0–9 turned into `_` (`db-migrate` →
 * FENCEPOST_TOKEN_DB_MIGRATE), so that it is a name every shell can read.
 */
export function tokenEnvName(lock: string): string {
  return `FENCEPOST_TOKEN_${lock.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * tokenEnvClash: the first two locks that map to the same variable, or undefined. Lock names are
 * DNS labels (lower-case letters, digits, `-`), which map one to one; only names that are no
 * lock's (upper case, `.` or `_`) can clash, and exec refuses them rather than pass one token under
 * two locks' names.
 */
export function tokenEnvClash(locks: readonly string[]): readonly [string, string] | undefined {
  const byName = new Map<string, string>();
  for (const l of locks) {
    const other = byName.get(tokenEnvName(l));
    if (other !== undefined) return [other, l];
    byName.set(tokenEnvName(l), l);
  }
  return undefined;
}

/**
 * commandEnv is the command's environment: `base` with FENCEPOST_LOCKS (the locks, space-separated,
 * in acquisition order) and FENCEPOST_TOKEN_<LOCK> for each; with one lock also FENCEPOST_LOCK and
 * FENCEPOST_TOKEN, as exec always set. With several, FENCEPOST_LOCK and FENCEPOST_TOKEN are
 * removed (from `base` too: an outer exec's would be the wrong token): a single token cannot stand
 * for a set, and a script that reads it must be told so by its absence. A Semaphore lock adds its
 * permit number: FENCEPOST_PERMIT_<LOCK> (one lock: also FENCEPOST_PERMIT), for a guard that
 * fences it per permit.
 */
export function commandEnv(
  base: Readonly<Record<string, string | undefined>>,
  held: readonly { readonly lock: string; readonly token: bigint; readonly permit?: number | undefined }[],
): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...base };
  delete env.FENCEPOST_LOCK;
  delete env.FENCEPOST_TOKEN;
  delete env.FENCEPOST_PERMIT;
  env.FENCEPOST_LOCKS = held.map((h) => h.lock).join(' ');
  for (const h of held) {
    env[tokenEnvName(h.lock)] = h.token.toString();
    if (h.permit !== undefined) env[permitEnvName(h.lock)] = String(h.permit);
  }
  const [only] = held;
  if (held.length === 1 && only !== undefined) {
    env.FENCEPOST_LOCK = only.lock;
    env.FENCEPOST_TOKEN = only.token.toString();
    if (only.permit !== undefined) env.FENCEPOST_PERMIT = String(only.permit);
  }
  return env;
}

/**
 * permitEnvName is the variable that carries a Semaphore lock's permit number to the command:
 * FENCEPOST_PERMIT_ and the lock name spelled as in {@link tokenEnvName}.
 */
export function permitEnvName(lock: string): string {
  return `FENCEPOST_PERMIT_${lock.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}
