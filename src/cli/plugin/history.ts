/** `kubectl fencepost history LOCK`: read (read.ts), merge (history-view.ts), print. */
import { parsePluginArgs } from '../../config/plugin.ts';
import { historyTable, historyView } from './history-view.ts';
import { connect, readLock, snapshot } from './read.ts';
import { HISTORY } from './usage.ts';

/** runHistory runs one `history` command line; resolves with the exit code. */
export async function runHistory(argv: readonly string[]): Promise<number> {
  const o = parsePluginArgs(HISTORY, argv);
  const c = connect(o);
  const s = await snapshot(c, await readLock(c, c.namespace, o.lock ?? ''));
  const v = historyView(s);
  process.stdout.write(o.output === 'json' ? `${JSON.stringify(v, null, 2)}\n` : historyTable(v, Date.now()));
  return 0;
}
