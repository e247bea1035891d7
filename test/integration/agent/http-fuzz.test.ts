import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentProcess } from '../../support/agent-processes.ts';
import { sharedKubeconfigPath } from '../../support/env.ts';
import { createLock, createPod, lockBody, type TestKube } from '../../support/fixtures.ts';
import { useLockController } from '../../support/lock-controller.ts';
import { mulberry32 } from '../../support/prng.ts';
import { getStatus } from '../../support/testbed/http-probe.ts';
import type { ManagedProcess } from '../../support/testbed/processes.ts';

/** raw sends bytes on a fresh TCP connection and resolves with the status line of the answer ('' if none within 3 s). */
function raw(port: number, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    const done = (): void => {
      s.destroy();
      resolve(got.split('\r\n')[0] ?? '');
    };
    const timer = setTimeout(done, 3000);
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) {
        clearTimeout(timer);
        done();
      }
    });
    s.on('error', () => {
      clearTimeout(timer);
      done();
    });
    s.on('connect', () => {
      s.write(bytes);
    });
  });
}

// The agent's local HTTP API is reachable by every container of the pod (and by anything that can
// reach its port): it must survive any request — malformed percent-encoding, odd request targets,
// huge headers and bodies, slow clients — answering an error, never exiting.
describe("the agent's HTTP API survives any request", () => {
  const fx = useLockController('httpfuzz-');
  let t: TestKube;
  let dir: string;
  let agent: AgentProcess;
  const procs: ManagedProcess[] = [];
  beforeAll(async () => {
    t = fx.t;
    dir = mkdtempSync(join(tmpdir(), 'fencepost-httpfuzz-'));
    const pod = await createPod(t, 'fz-0', { app: 'fz' });
    agent = await startAgent({
      lock: 'fz',
      pod: 'fz-0',
      uid: pod.metadata?.uid ?? '',
      namespace: t.namespace,
      kubeconfig: sharedKubeconfigPath(),
      logDir: dir,
    });
    procs.push(agent.process);
    await createLock(t, lockBody('fz', 'fz'));
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  const alive = async (): Promise<void> => {
    expect(agent.process.isRunning(), 'the agent process exited').toBe(true);
    expect((await getStatus(`http://127.0.0.1:${agent.port}/healthz`)).status).toBe(200);
  };

  it.each([
    ['a malformed percent-encoding in the lock name', 'GET /v1/locks/%E0%A4%A HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['a lone percent sign', 'GET /v1/locks/% HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['an absolute-form target with a bad port', 'GET http://a:99999/v1/locks/fz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['an absolute-form target that is not a URL', 'GET http://[/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['an asterisk target', 'OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['a CONNECT', 'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['a NUL in the path', 'GET /v1/locks/f\u0000z HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    ['a 64 KiB header', `GET /v1/locks/fz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(65_536)}\r\n\r\n`],
    [
      'a 1 MiB body on a POST',
      `POST /v1/locks/fz/release HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\n${'b'.repeat(1_048_576)}`,
    ],
    ['a bad Content-Length', 'POST /v1/locks/fz/acquire HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n'],
    ['an unknown method', 'BREW /v1/locks/fz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
    [
      'a wait that is not a duration',
      'POST /v1/locks/fz/acquire?wait=%FF HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    ],
    ['garbage', '\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003 not http at all\r\n\r\n'],
  ])('%s: answered (or the connection closed), and the agent keeps serving', async (_what, request) => {
    const status = await raw(agent.port, request);
    expect(status === '' || /^HTTP\/1\.1 [1-5][0-9][0-9] /.test(status), `status line ${JSON.stringify(status)}`).toBe(
      true,
    );
    await alive();
  });

  it('answers 300 random request targets from one seed and keeps serving', async () => {
    const rnd = mulberry32(20261204);
    const alphabet = [
      '/',
      '%',
      '%2',
      '%2F',
      '%E0',
      '%FF',
      '..',
      '.',
      '?',
      '#',
      '&',
      '=',
      'v1',
      'locks',
      'fz',
      'a',
      '~',
      ';',
      '@',
      ':',
      '\\',
      '%00',
    ];
    for (let i = 0; i < 300; i++) {
      let path = '/';
      const n = 1 + Math.floor(rnd() * 10);
      for (let k = 0; k < n; k++) path += alphabet[Math.floor(rnd() * alphabet.length)] ?? '';
      const method = ['GET', 'POST', 'DELETE', 'PUT'][Math.floor(rnd() * 4)] ?? 'GET';
      await raw(
        agent.port,
        method === 'POST'
          ? `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`
          : `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n`,
      );
      if (!agent.process.isRunning()) throw new Error(`the agent exited after ${method} ${path}`);
    }
    await alive();
  });

  it('serves others while a slow client trickles its headers', async () => {
    const s = connect(agent.port, '127.0.0.1');
    await new Promise<void>((r) => s.on('connect', () => r()));
    s.write('GET /v1/locks/fz HTTP/1.1\r\nHo');
    try {
      await alive();
    } finally {
      s.destroy();
    }
  });
});
