/**
 * What each `kubectl fencepost` command accepts and its --help text. Imports nothing heavy, so
 * that --help loads no Kubernetes client (src/cli/dispatch.ts loads a command's code only when it
 * runs).
 */
import type { PluginCommandSpec } from '../../config/plugin.ts';

/** COMMON_FLAGS: the flags every command takes, kubectl's spellings. */
const COMMON_FLAGS = `  --kubeconfig PATH             kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)
  --context NAME                kubeconfig context (default: the current context)
  -n, --namespace NS            the lock's namespace (default: the context's namespace, else default)
  -o, --output FORMAT           table (default) or json
`;

/** STATUS: `kubectl fencepost status [LOCK] [-n NS | -A]`. */
export const STATUS: PluginCommandSpec = { name: 'status', lock: 'optional', flags: ['all-namespaces'] };

/** STATUS_USAGE is printed by `kubectl fencepost status --help`. */
export const STATUS_USAGE = `Usage: kubectl fencepost status [LOCK] [-n NS | -A] [flags]

Who holds each DistributedLock, with which fencing token, when the holder's lease runs out
(the Lease's renewTime + leaseDurationSeconds, by this machine's clock), the Mutex queue, and the
last transitions (from the lock's Events). Without LOCK: one row per lock; with LOCK: that lock
in full.

${COMMON_FLAGS}  -A, --all-namespaces          every namespace's locks (not with LOCK)
`;

/** HISTORY: `kubectl fencepost history LOCK`. */
export const HISTORY: PluginCommandSpec = { name: 'history', lock: 'required', flags: [] };

/** HISTORY_USAGE is printed by `kubectl fencepost history --help`. */
export const HISTORY_USAGE = `Usage: kubectl fencepost history LOCK [-n NS] [flags]

The lock's grants and handoffs with their holders and fencing tokens, oldest first, as far as the
cluster still has them: the controller's Events (kept for the API server's --event-ttl, 1 h by
default), the Lease's current or last grant, and status.completedRuns (Mutex). The output ends
with what is and is not retained.

${COMMON_FLAGS}`;

/** EXPLAIN: `kubectl fencepost explain LOCK [--pod POD]`. */
export const EXPLAIN: PluginCommandSpec = { name: 'explain', lock: 'required', flags: ['pod', 'controller-lease'] };

/** EXPLAIN_USAGE is printed by `kubectl fencepost explain --help`. */
export const EXPLAIN_USAGE = `Usage: kubectl fencepost explain LOCK [--pod POD] [-n NS] [flags]

Why the lock is held by whom it is held, or why nobody holds it: no pod matches the selector,
candidates not Ready, a Mutex lock nobody asked for, lock delay after an expiry, the fencing
backend unavailable, the controller not running or not leading, … The reasons come from the
controller's own decision function, run on what the cluster shows now. With --pod: why that pod
is not the holder (not selected, not Ready, no Mutex request, its place in line).

${COMMON_FLAGS}  --pod POD                     explain why this pod is (not) the holder
  --controller-lease [NS/]NAME  the controller's leader-election Lease (default: fencepost-controller, in any namespace)
`;
