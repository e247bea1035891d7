/**
 * The flags of `kubectl fencepost` (src/cli/kubectl-fencepost.ts), parsed once into a frozen
 * object. kubectl hands a plugin every word after its name untouched, so the plugin reads
 * kubectl's own spellings itself: `-n`/`--namespace`, `-A`/`--all-namespaces`, `-o`/`--output`,
 * `--kubeconfig`, `--context`. Unlike the other subcommands (config/flags.ts, long flags only, no
 * positional argument) these take short flags and one positional argument, the lock's name.
 */
import { parseArgs } from 'node:util';
import { parseDuration } from './duration.ts';
import { UsageError } from './usage-error.ts';

/** OutputFormat: `table` (kubectl-style columns, the default) or `json` (machine-readable). */
export type OutputFormat = 'table' | 'json';

/** PluginFlag names a flag only some commands accept. */
export type PluginFlag = 'all-namespaces' | 'pod' | 'controller-lease' | 'to' | 'drain' | 'wait' | 'force' | 'yes';

/** PluginCommandSpec says what one plugin command accepts. */
export interface PluginCommandSpec {
  /** name: the command, for messages (`status`). */
  readonly name: string;
  /** lock: whether the LOCK argument is `required`, `optional` or `none`. */
  readonly lock: 'required' | 'optional' | 'none';
  /** flags: the optional flags beyond the common ones (kubeconfig, context, namespace, output). */
  readonly flags: readonly PluginFlag[];
}

/** ControllerLeaseRef names the controller's leader-election Lease; namespace undefined = look in every namespace. */
export interface ControllerLeaseRef {
  readonly namespace: string | undefined;
  readonly name: string;
}

/** PluginOptions is one parsed plugin command line. */
export interface PluginOptions {
  /** kubeconfig: --kubeconfig; default: $KUBECONFIG, else ~/.kube/config, else in-cluster. */
  readonly kubeconfig: string | undefined;
  /** context: --context; default the kubeconfig's current context. */
  readonly context: string | undefined;
  /** namespace: -n/--namespace; default the context's namespace, else `default`. */
  readonly namespace: string | undefined;
  /** allNamespaces: -A/--all-namespaces (status without LOCK only). */
  readonly allNamespaces: boolean;
  /** output: -o/--output; default table. */
  readonly output: OutputFormat;
  /** lock: the LOCK argument. */
  readonly lock: string | undefined;
  /** pod: --pod (explain): why this pod is not the holder. */
  readonly pod: string | undefined;
  /** controllerLease: --controller-lease [NAMESPACE/]NAME (explain); default fencepost-controller in any namespace. */
  readonly controllerLease: ControllerLeaseRef;
  /** to: --to POD (handover): the pod to hand the lock to. */
  readonly to: string | undefined;
  /** drainMs: --drain D (handover; the command checks the CRD's bounds); default the lock's spec. */
  readonly drainMs: number | undefined;
  /** waitMs: --wait[=D] (handover, release): wait for the controller's answer, up to D (default 2m); undefined: do not wait. */
  readonly waitMs: number | undefined;
  /** force: --force (release): the only kind of release the plugin does. */
  readonly force: boolean;
  /** yes: --yes (release --force): do not ask for confirmation. */
  readonly yes: boolean;
}

/** DEFAULT_WAIT_MS: --wait without a value waits this long for the controller's answer. */
export const DEFAULT_WAIT_MS = 120_000;

/** DEFAULT_CONTROLLER_LEASE is the controller's default --leader-election-id (config/controller.ts). */
export const DEFAULT_CONTROLLER_LEASE = 'fencepost-controller';

/** DNS_NAME: a lock, pod, Lease or namespace name (a DNS subdomain; lock names are also at most 63 characters, which the CRD checks). */
const DNS_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

function checkName(flag: string, value: string): string {
  if (!DNS_NAME.test(value))
    throw new UsageError(flag, `must be a Kubernetes object name, got ${JSON.stringify(value)}`);
  return value;
}

/**
 * parsePluginArgs parses the words after the command (`status`, `history`, `explain`).
 *
 * @throws UsageError naming the flag (or `LOCK`) and the value, for: an unknown flag, a flag this
 * command does not take, a missing value, an output format other than table or json, -A with a
 * LOCK, a missing or extra LOCK, a name that is not a Kubernetes object name.
 */
export function parsePluginArgs(spec: PluginCommandSpec, argv: readonly string[]): PluginOptions {
  let parsed;
  try {
    parsed = parseArgs({
      // `--wait` alone means the default wait: parseArgs has no optional values, so spell it out.
      args: argv.map((a) => (a === '--wait' ? `--wait=${DEFAULT_WAIT_MS}ms` : a)),
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        namespace: { type: 'string', short: 'n' },
        'all-namespaces': { type: 'boolean', short: 'A' },
        output: { type: 'string', short: 'o' },
        pod: { type: 'string' },
        'controller-lease': { type: 'string' },
        to: { type: 'string' },
        drain: { type: 'string' },
        wait: { type: 'string' },
        force: { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
      },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    throw usageErrorOf(err, spec.name);
  }
  const v = parsed.values;
  for (const flag of ['all-namespaces', 'pod', 'controller-lease', 'to', 'drain', 'wait', 'force', 'yes'] as const) {
    if (v[flag] !== undefined && !spec.flags.includes(flag))
      throw new UsageError(`--${flag}`, `not a flag of ${spec.name} (see kubectl fencepost ${spec.name} --help)`);
  }
  const output = v.output ?? 'table';
  if (output !== 'table' && output !== 'json')
    throw new UsageError('--output', `must be table or json, got ${JSON.stringify(output)}`);
  const [lock, ...extra] = parsed.positionals;
  if (extra.length > 0)
    throw new UsageError(JSON.stringify(extra[0]), `unexpected argument; ${spec.name} takes at most one LOCK`);
  if (lock === undefined && spec.lock === 'required')
    throw new UsageError('LOCK', `missing: kubectl fencepost ${spec.name} LOCK`);
  if (lock !== undefined && spec.lock === 'none')
    throw new UsageError(JSON.stringify(lock), `unexpected argument; ${spec.name} takes no LOCK`);
  const allNamespaces = v['all-namespaces'] === true;
  if (allNamespaces && lock !== undefined)
    throw new UsageError('--all-namespaces', `cannot be used with a LOCK (${JSON.stringify(lock)}); use -n NAMESPACE`);
  if (allNamespaces && v.namespace !== undefined)
    throw new UsageError('--all-namespaces', `cannot be used with --namespace ${JSON.stringify(v.namespace)}`);
  return Object.freeze({
    kubeconfig: v.kubeconfig,
    context: v.context,
    namespace: v.namespace !== undefined ? checkName('--namespace', v.namespace) : undefined,
    allNamespaces,
    output,
    lock: lock !== undefined ? checkName('LOCK', lock) : undefined,
    pod: v.pod !== undefined ? checkName('--pod', v.pod) : undefined,
    controllerLease: controllerLeaseOf(v['controller-lease']),
    to: v.to !== undefined ? checkName('--to', v.to) : undefined,
    drainMs: v.drain !== undefined ? parseDuration(v.drain, '--drain') : undefined,
    waitMs: v.wait !== undefined ? parseDuration(v.wait, '--wait') : undefined,
    force: v.force === true,
    yes: v.yes === true,
  });
}

/**
 * usageErrorOf turns a parseArgs error into one line naming the flag: parseArgs names it only
 * inside its message, over up to three lines, with advice about `--` that does not apply here.
 */
function usageErrorOf(err: unknown, command: string): unknown {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  if (!(err instanceof Error) || typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) return err;
  const flag = /'(-[^', ]*)/.exec(err.message)?.[1] ?? 'flags';
  const see = `(see kubectl fencepost ${command} --help)`;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return new UsageError(flag, `unknown flag ${see}`);
  if (err.message.includes('argument missing')) return new UsageError(flag, `missing value ${see}`);
  if (err.message.includes('ambiguous')) {
    const long = /use '(--[a-z-]+)=/.exec(err.message)?.[1] ?? flag;
    return new UsageError(
      flag,
      `missing value (the next word starts with a dash; write ${long}=VALUE if it is the value)`,
    );
  }
  if (err.message.includes('does not take an argument')) return new UsageError(flag, `takes no value ${see}`);
  return new UsageError(flag, `${err.message.split('\n')[0] ?? err.message} ${see}`);
}

/** controllerLeaseOf reads --controller-lease `[NAMESPACE/]NAME`. */
function controllerLeaseOf(text: string | undefined): ControllerLeaseRef {
  if (text === undefined) return { namespace: undefined, name: DEFAULT_CONTROLLER_LEASE };
  const parts = text.split('/');
  if (parts.length > 2)
    throw new UsageError('--controller-lease', `must be NAME or NAMESPACE/NAME, got ${JSON.stringify(text)}`);
  const [a = '', b] = parts;
  return b === undefined
    ? { namespace: undefined, name: checkName('--controller-lease', a) }
    : { namespace: checkName('--controller-lease', a), name: checkName('--controller-lease', b) };
}
