/**
 * worker.ts — the demo's application process, one per pod: it asks its pod's fencepost agent
 * whether it holds the lock and, while it does, writes to the protected Redis key every ~200 ms.
 *
 * Each round is check → think → write: the worker asks the agent, prints `checked`, waits
 * --think-ms (the work between deciding and acting), then writes with the token it SAW. A process
 * frozen during that wait (the demo sends SIGSTOP there) wakes up and writes with a token that
 * may be stale by then: the stale-believer scenario that fencing tokens exist for.
 *
 * With the guard (default) the write goes through redisGuard, which refuses a token below the
 * key's high-water mark; with --no-fencing it is a plain `SET key value GET` (the old value is
 * reported, so the demo can name the write that was overwritten).
 *
 * Output: one JSON object per line on stdout (WorkerEvent, parsed by the demo).
 */
import { request } from 'node:http';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { redisGuard } from '../../src/guards/redis-guard.ts';
import type { WorkerEvent } from './events.ts';

const { values } = parseArgs({
  strict: true,
  options: {
    pod: { type: 'string' },
    agent: { type: 'string' },
    lock: { type: 'string', default: 'billing' },
    redis: { type: 'string' },
    key: { type: 'string', default: 'ledger' },
    'no-fencing': { type: 'boolean', default: false },
    'interval-ms': { type: 'string', default: '200' },
    'think-ms': { type: 'string', default: '150' },
  },
});
const pod = values.pod ?? '';
const agent = values.agent ?? '';
const redisUrl = values.redis ?? '';
if (pod === '' || agent === '' || redisUrl === '') {
  process.stderr.write(
    'Usage: worker.ts --pod NAME --agent http://127.0.0.1:PORT --redis redis://HOST:PORT [--lock NAME] [--key KEY] [--no-fencing]\n',
  );
  process.exit(2);
}
const fenced = !values['no-fencing'];
const key = values.key;
const intervalMs = Number(values['interval-ms']);
const thinkMs = Number(values['think-ms']);

/** AgentView is the part of the agent's LockSnapshot the worker uses. */
interface AgentView {
  readonly held: boolean;
  readonly token: string | undefined;
  readonly holder: string | undefined;
  readonly state: string;
}

function emit(e: WorkerEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
}

/** askAgent performs GET /v1/locks/NAME on the pod's agent. */
function askAgent(): Promise<AgentView> {
  return new Promise((resolve, reject) => {
    const req = request(`${agent}/v1/locks/${values.lock}`, { timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => {
        try {
          const s = JSON.parse(body) as { held?: unknown; token?: unknown; holder?: unknown; state?: unknown };
          resolve({
            held: s.held === true,
            token: typeof s.token === 'string' ? s.token : undefined,
            holder: typeof s.holder === 'string' ? s.holder : undefined,
            state: typeof s.state === 'string' ? s.state : 'unknown',
          });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on('timeout', () => {
      req.destroy(new Error('agent did not answer in 1 s'));
    });
    req.on('error', reject);
    req.end();
  });
}

const client = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
client.on('error', () => undefined); // a failed command rejects; the loop reports it
const guard = redisGuard(client, { lock: values.lock }); // one mark for the lock, as the race page's snippets show

const stop = (): void => {
  client.disconnect();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

let lastState = '';
let seq = 0;
for (;;) {
  let view: AgentView;
  try {
    view = await askAgent();
  } catch {
    view = { held: false, token: undefined, holder: undefined, state: 'unreachable' };
  }
  if (view.state !== lastState) {
    lastState = view.state;
    emit({
      type: 'state',
      pod,
      state: view.state,
      held: view.held,
      ...(view.token !== undefined ? { token: view.token } : {}),
      ...(view.holder !== undefined ? { holder: view.holder } : {}),
    });
  }
  if (!view.held || view.token === undefined) {
    await sleep(intervalMs);
    continue;
  }
  const token = view.token;
  const n = ++seq;
  emit({ type: 'checked', pod, seq: n, token });
  await sleep(thinkMs); // deciding → acting: a pause here leaves the worker believing in `token`
  const value = `written by ${pod} with token ${token}`;
  try {
    if (fenced) {
      const r = await guard.write(key, token, value);
      emit(
        r.accepted
          ? { type: 'write', pod, seq: n, token, fenced, accepted: true, value }
          : { type: 'write', pod, seq: n, token, fenced, accepted: false, value, highWater: r.highWater.toString() },
      );
    } else {
      const previous = await client.set(key, value, 'GET');
      emit({ type: 'write', pod, seq: n, token, fenced, accepted: true, value, previous });
    }
  } catch (err) {
    emit({ type: 'error', pod, seq: n, message: err instanceof Error ? err.message : String(err) });
  }
  await sleep(Math.max(0, intervalMs - thinkMs));
}
