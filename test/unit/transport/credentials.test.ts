/**
 * Credentials re-reading its TLS files on the controller's schedule: a rotated CA or client
 * certificate is taken up at the first read 2 s after the last one, never before, and unchanged
 * bytes keep the generation (so the client keeps its connection pool).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CREDENTIALS_RELOAD_MS } from '../../../src/cli/controller.ts';
import { Credentials, DEFAULT_RELOAD_MS } from '../../../src/transport/credentials.ts';
import { plainClusterConfig } from '../../support/api-client.ts';

describe('Credentials TLS files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-credentials-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('the controller re-reads its CA and client certificate files every 2 s, where the default is a minute', () => {
    expect(CREDENTIALS_RELOAD_MS).toBe(2_000);
    expect(DEFAULT_RELOAD_MS).toBe(60_000);
    const ca = join(dir, 'ca.crt');
    const cert = join(dir, 'client.crt');
    const key = join(dir, 'client.key');
    writeFileSync(ca, 'ca-1');
    writeFileSync(cert, 'cert-1');
    writeFileSync(key, 'key-1');
    let now = 1_000;
    const creds = new Credentials(
      plainClusterConfig('https://127.0.0.1:6443', {
        ca: { file: ca },
        clientCert: { file: cert },
        clientKey: { file: key },
      }),
      { reloadMs: CREDENTIALS_RELOAD_MS, nowMs: () => now },
    );
    const first = creds.tls();
    expect(first.ca?.toString()).toBe('ca-1');
    expect(first.cert?.toString()).toBe('cert-1');

    // Unchanged bytes after the period: the same material, the same generation.
    now += CREDENTIALS_RELOAD_MS;
    expect(creds.tls()).toBe(first);

    // A rotated CA is not read before the period has passed since the last read...
    writeFileSync(ca, 'ca-2');
    now += CREDENTIALS_RELOAD_MS - 1;
    expect(creds.tls()).toBe(first);
    // ...and is taken up at the first read once it has.
    now += 1;
    const second = creds.tls();
    expect(second.ca?.toString()).toBe('ca-2');
    expect(second.generation).toBe(first.generation + 1);

    // A rotated certificate and key likewise, 2 s later.
    writeFileSync(cert, 'cert-2');
    writeFileSync(key, 'key-2');
    now += CREDENTIALS_RELOAD_MS;
    const third = creds.tls();
    expect(third.cert?.toString()).toBe('cert-2');
    expect(third.key?.toString()).toBe('key-2');
    expect(third.generation).toBe(second.generation + 1);
  });
});
