/**
 * module-trace-hook.ts — preloaded with `node --import` by test/support/module-trace.ts: records
 * the URL of every module the process loads (ES modules and require()d CommonJS alike, through the
 * synchronous `node:module` hooks) and writes them, one per line, to $FENCEPOST_MODULE_TRACE when
 * the process exits. It changes nothing it loads.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const out = process.env['FENCEPOST_MODULE_TRACE'];
const loaded: string[] = [];
registerHooks({
  load(url, context, nextLoad) {
    loaded.push(url);
    return nextLoad(url, context);
  },
});
process.on('exit', () => {
  if (out !== undefined) writeFileSync(out, loaded.join('\n'));
});
