/**
 * The `fencepost-agent` executable: the in-pod sidecar (`agent`) and `exec`, compiled by Bun into
 * one file by hack/build-agent.ts. It is what the chart runs beside the app, what you copy into an
 * app image for `fencepost-agent exec`, and what the integration tests and benchmarks start. It
 * offers no `controller` (that runs on Node: `fencepost controller`), and names no controller
 * module, so none is bundled.
 *
 * Its lock stores (spec.store Redis and Redlock locks, `exec --store`) run on Bun's built-in Redis
 * client (stores/bun/), loaded only when a store is used: no Redis library is bundled.
 *
 * It first restarts itself without JavaScriptCore's JIT (interpreter-only.ts): the imports above
 * are all small; nothing of the agent runs before that.
 */
import { provideStores } from '../client/store-loader.ts';
import { AGENT, EXEC } from './agent-commands.ts';
import { run } from './dispatch.ts';
import { runInterpreterOnly } from './interpreter-only.ts';

runInterpreterOnly();
provideStores(() => import('../stores/bun/open.ts'));
run('fencepost-agent', { agent: AGENT, exec: EXEC });
