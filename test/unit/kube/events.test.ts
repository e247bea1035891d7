/**
 * The Event recorder's retry (the agent's LockLost Event): a write that gets no answer or a server
 * error is tried again with backoff, a refusal is not, and the Event keeps the time it happened.
 * And its wire protocol for counting: an identical Event is a PATCH of the first one's name, and
 * a PATCH answered 404 (the Event expired) creates it again.
 * The API server is a local HTTP server that answers what each case needs; the real one is in
 * test/integration/controller/events.test.ts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeConfig, type CoreV1Event } from '@kubernetes/client-node';
import { eventRecorder } from '../../../src/kube/events.ts';
import { silentLogger } from '../../../src/observability/logger.ts';
import { realClock } from '../../../src/runtime/clock.ts';
import { eventually } from '../../support/env.ts';

const target = { apiVersion: 'v1', kind: 'Pod', namespace: 'ns', name: 'web-0', uid: 'uid-0' };

describe('eventRecorder with retry', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => {
      server?.close(() => {
        r();
      });
    });
    server = undefined;
  });

  /** serve answers the n-th Event write (from 1) with statuses[n-1] (the last one repeats) and keeps the bodies. */
  const serve = async (statuses: number[]): Promise<{ kc: KubeConfig; bodies: CoreV1Event[]; requests: string[] }> => {
    const bodies: CoreV1Event[] = [];
    const requests: string[] = [];
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => {
        text += c.toString();
      });
      req.on('end', () => {
        const body = JSON.parse(text) as CoreV1Event;
        bodies.push(body);
        requests.push(`${req.method ?? ''} ${req.url ?? ''} ${req.headers['content-type'] ?? ''}`);
        const status = statuses[Math.min(bodies.length, statuses.length) - 1] ?? 500;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            status < 300
              ? { ...body, metadata: { ...body.metadata, name: 'web-0.abc' } }
              : { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: status },
          ),
        );
      });
    });
    await new Promise<void>((r) => {
      server?.listen(0, '127.0.0.1', r);
    });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: 'c', server: `http://127.0.0.1:${(server?.address() as AddressInfo).port}`, skipTLSVerify: true },
      ],
      users: [{ name: 'u' }],
      contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
      currentContext: 'c',
    });
    return { kc, bodies, requests };
  };
  const settle = (ms: number): Promise<void> =>
    new Promise((r) => {
      setTimeout(r, ms);
    });

  it('tries a server error again until the Event is written, with the time of the first try', async () => {
    const { kc, bodies } = await serve([503, 500, 201]);
    eventRecorder(kc, 'fencepost-agent', 'web-0', silentLogger, {
      attempts: 5,
      firstDelayMs: 20,
      maxDelayMs: 50,
      clock: realClock,
    }).emit(target, 'Warning', 'LockLost', 'Stepped down from lock db (fencing token 7): renew deadline passed');
    await eventually(() => {
      expect(bodies).toHaveLength(3);
    }, 10_000);
    expect(new Set(bodies.map((b) => String(b.firstTimestamp)))).toHaveProperty('size', 1);
    expect(bodies[2]).toMatchObject({
      reason: 'LockLost',
      type: 'Warning',
      involvedObject: { kind: 'Pod', name: 'web-0', uid: 'uid-0' },
    });
  });

  const RETRY = { attempts: 3, firstDelayMs: 10, maxDelayMs: 20, clock: realClock };
  it.each([
    { name: 'stops after the given number of attempts', statuses: [503], retry: RETRY, writes: 3 },
    { name: 'does not try a refusal again (403: no RBAC for Events)', statuses: [403, 201], retry: RETRY, writes: 1 },
    {
      name: "never retries without a retry policy (the controller's Events)",
      statuses: [503, 201],
      retry: undefined,
      writes: 1,
    },
  ])('$name', async ({ statuses, retry, writes }) => {
    const { kc, bodies } = await serve(statuses);
    eventRecorder(kc, 'fencepost-agent', 'web-0', silentLogger, retry).emit(target, 'Warning', 'LockLost', 'x');
    await eventually(() => {
      expect(bodies).toHaveLength(writes);
    }, 10_000);
    await settle(200); // ten times the longest retry delay: no further write
    expect(bodies).toHaveLength(writes);
  });

  it('PATCHes the first Event with count 2 for an identical second one', async () => {
    const { kc, bodies, requests } = await serve([201, 200]);
    const recorder = eventRecorder(kc, 'fencepost-agent', 'web-0', silentLogger);
    recorder.emit(target, 'Warning', 'LockLost', 'x');
    recorder.emit(target, 'Warning', 'LockLost', 'x');
    await eventually(() => {
      expect(bodies).toHaveLength(2);
    }, 10_000);
    expect(requests).toEqual([
      'POST /api/v1/namespaces/ns/events application/json',
      'PATCH /api/v1/namespaces/ns/events/web-0.abc application/merge-patch+json',
    ]);
    expect(Object.keys(bodies[1] ?? {}).sort()).toEqual(['count', 'lastTimestamp', 'message']);
    expect(bodies[1]).toMatchObject({ count: 2, message: 'x' });
  });

  it.each([
    { status: 404, why: 'the Event to PATCH is gone (its TTL passed)' },
    { status: 403, why: 'RBAC grants create but not patch' },
  ])(
    'creates the Event again, with its count and firstTimestamp, when a PATCH is answered $status: $why',
    async ({ status }) => {
      const { kc, bodies, requests } = await serve([201, status, 201]);
      const recorder = eventRecorder(kc, 'fencepost-agent', 'web-0', silentLogger);
      recorder.emit(target, 'Warning', 'LockLost', 'x');
      await eventually(() => {
        expect(bodies).toHaveLength(1);
      }, 10_000);
      await settle(5); // a later wall-clock millisecond for the second Event
      recorder.emit(target, 'Warning', 'LockLost', 'x');
      await eventually(() => {
        expect(bodies).toHaveLength(3);
      }, 10_000);
      expect(requests.map((r) => r.split(' ')[0])).toEqual(['POST', 'PATCH', 'POST']);
      expect(bodies[2]).toMatchObject({ count: 2, firstTimestamp: bodies[0]?.firstTimestamp, reason: 'LockLost' });
      expect(bodies[2]?.lastTimestamp).not.toEqual(bodies[0]?.lastTimestamp);
    },
  );

  it('drops the Events beyond the burst of their object', async () => {
    const { kc, bodies } = await serve([201]);
    const recorder = eventRecorder(kc, 'fencepost-agent', 'web-0', silentLogger, undefined, {
      correlation: { burst: 2 },
    });
    for (const m of ['a', 'b', 'c', 'd']) recorder.emit(target, 'Warning', 'LockLost', m);
    recorder.emit({ ...target, name: 'web-1', uid: 'uid-1' }, 'Warning', 'LockLost', 'a');
    await eventually(() => {
      expect(bodies).toHaveLength(3);
    }, 10_000);
    await settle(200);
    expect(bodies.map((b) => `${b.involvedObject.name}:${b.message ?? ''}`)).toEqual(['web-0:a', 'web-0:b', 'web-1:a']);
  });
});
