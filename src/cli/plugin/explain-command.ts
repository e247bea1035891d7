/** `kubectl fencepost explain LOCK`: read (read.ts), explain (explain.ts), print. */
import { parsePluginArgs } from '../../config/plugin.ts';
import { explainLock, explainText } from './explain.ts';
import { connect, controllerLease, readLock, readPod, snapshot } from './read.ts';
import { EXPLAIN } from './usage.ts';

/** runExplain runs one `explain` command line; resolves with the exit code. */
export async function runExplain(argv: readonly string[]): Promise<number> {
  const o = parsePluginArgs(EXPLAIN, argv);
  const c = connect(o);
  const lock = await readLock(c, c.namespace, o.lock ?? '');
  const [s, controller, pod] = await Promise.all([
    snapshot(c, lock),
    controllerLease(c, o.controllerLease),
    o.pod !== undefined ? readPod(c, c.namespace, o.pod) : Promise.resolve(undefined),
  ]);
  const e = explainLock({
    snapshot: s,
    controller,
    nowMs: Date.now(),
    ...(o.pod !== undefined ? { pod: { name: o.pod, object: pod } } : {}),
  });
  process.stdout.write(o.output === 'json' ? `${JSON.stringify(e, null, 2)}\n` : explainText(e));
  return 0;
}
