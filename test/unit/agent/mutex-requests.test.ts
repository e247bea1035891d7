/**
 * MutexRequests (src/agent/mutex-requests.ts): the annotations a pod writes for a lock, and what
 * goes over the wire — a merge patch of the pod's own annotations guarded by its UID. The API
 * server is a local HTTP server that records requests. (Completed runs: run-completions.test.ts.)
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MutexRequests, requestAnnotations, withdrawAnnotations } from '../../../src/agent/mutex-requests.ts';
import { podKeys } from '../../../src/protocol/names.ts';
import { apiClientFor } from '../../support/api-client.ts';
import { FakeClock } from '../../support/fake-clock.ts';

const keys = podKeys('db');
const NOW = new Date('2025-01-01T00:00:00.123Z');

describe('MutexRequests annotations', () => {
  it.each([
    {
      name: 'a request is stamped to the ms and carries the run id',
      patch: requestAnnotations('db', NOW, 'run-1'),
      want: { [keys.request]: '2025-01-01T00:00:00.123Z', [keys.runId]: 'run-1' },
    },
    {
      name: 'a request without a run id removes a stale one',
      patch: requestAnnotations('db', NOW),
      want: { [keys.request]: '2025-01-01T00:00:00.123Z', [keys.runId]: null },
    },
    {
      name: 'a withdrawal removes the request and its run id',
      patch: withdrawAnnotations('db'),
      want: { [keys.request]: null, [keys.runId]: null },
    },
  ])('$name', ({ patch, want }) => {
    expect(patch).toEqual(want);
  });
});

describe('MutexRequests on the wire', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => {
      server?.close(() => {
        r();
      });
    });
    server = undefined;
  });

  interface Seen {
    readonly line: string;
    readonly body: unknown;
  }

  /** serve answers every request with `status` and `body`, and records what it was sent. */
  const serve = async (status: number, body: unknown): Promise<{ m: MutexRequests; seen: Seen[] }> => {
    const seen: Seen[] = [];
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => {
        text += c.toString();
      });
      req.on('end', () => {
        seen.push({
          line: `${req.method ?? ''} ${req.url ?? ''} ${req.headers['content-type'] ?? ''}`.trim(),
          body: text === '' ? undefined : JSON.parse(text),
        });
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      });
    });
    await new Promise<void>((r) => {
      server?.listen(0, '127.0.0.1', r);
    });
    const m = new MutexRequests({
      api: apiClientFor(`http://127.0.0.1:${(server?.address() as AddressInfo).port}`),
      namespace: 'ns',
      lock: 'db',
      self: { name: 'web-0', uid: 'uid-0' },
      clock: new FakeClock({ wall: NOW }),
    });
    return { m, seen };
  };

  it('patches only its own pod, guarded by the pod UID, with a merge patch', async () => {
    const { m, seen } = await serve(200, { metadata: { name: 'web-0' } });
    await m.request('run-1');
    expect(seen).toEqual([
      {
        line: 'PATCH /api/v1/namespaces/ns/pods/web-0 application/merge-patch+json',
        body: { metadata: { uid: 'uid-0', annotations: requestAnnotations('db', NOW, 'run-1') } },
      },
    ]);
  });
});
