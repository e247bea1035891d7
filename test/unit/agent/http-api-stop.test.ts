import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { LockSession } from '../../../src/agent/session.ts';
import { serveAgentApi } from '../../../src/agent/http-api.ts';

/**
 * slowReleaseSession: a session whose release takes `ms` (a Lease write on a busy API server),
 * and which stops trusting its term when the release begins, as LockSession does.
 */
function slowReleaseSession(ms: number): { session: LockSession; held: () => boolean } {
  let held = true;
  const session = {
    onEvent: () => () => undefined,
    onHandover: () => () => undefined,
    heldToken: () => (held ? 7n : undefined),
    withdraw: () => Promise.resolve(),
    release: async () => {
      held = false;
      await new Promise((r) => setTimeout(r, ms));
    },
    snapshot: () => ({ lock: 'db', held }),
  };
  return { session: session as unknown as LockSession, held: () => held };
}

function post(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

// A CI run saw the plain-sidecar shutdown answer the application's POST …/release with a closed
// connection ("socket hang up"): the term ends when the release begins, so the shutdown went on and
// stopped the API server under the request.
describe('the agent API stops without losing an answer', () => {
  it('busy() while a release is being answered; stop() lets it finish before closing', async () => {
    const { session } = slowReleaseSession(300);
    const api = await serveAgentApi('127.0.0.1', 0, new Map([['db', session]]), { ready: () => true });
    const port = Number(api.address.split(':').at(-1));
    expect(api.busy()).toBe(false);
    const answer = post(port, '/v1/locks/db/release');
    await new Promise((r) => setTimeout(r, 100));
    expect(api.busy()).toBe(true);
    const stopped = api.stop();
    expect(await answer).toBe(200);
    await stopped;
    expect(api.busy()).toBe(false);
  });

  it('stop() without requests in flight closes at once', async () => {
    const { session } = slowReleaseSession(0);
    const api = await serveAgentApi('127.0.0.1', 0, new Map([['db', session]]), { ready: () => true });
    const began = performance.now();
    await api.stop();
    expect(performance.now() - began).toBeLessThan(1000); // a bound that catches a hang, not a timing
  });
});
