/**
 * An OCI registry for the testbed: the CNCF distribution registry (`registry serve`, built from
 * Go modules by hack/testbed/build.sh registry) on a free loopback port, plain HTTP, its storage
 * in dir. A release is published to it as to a public registry (hack/release.sh) and the cluster's
 * pods pull from it by digest.
 *
 * Plain HTTP on 127.0.0.1 is what every client here accepts without a certificate: helm treats
 * loopback hosts as insecure registries by itself (`--plain-http` makes it explicit), oras and
 * cosign take `--plain-http` / `--allow-insecure-registry`, skopeo `--src-tls-verify=false`, and
 * containerd reaches it with a hosts.toml of `server = "http://127.0.0.1:PORT"` (docs/testbed.md).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary } from './assets.ts';
import { waitHealthy } from './http-probe.ts';
import { freePort } from './ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from './processes.ts';

/** Registry is a running registry. */
export interface Registry {
  /** host is "127.0.0.1:PORT": the prefix of every reference pushed to it. */
  readonly host: string;
  /** url is "http://127.0.0.1:PORT" (the /v2/ API is under it). */
  readonly url: string;
  readonly dir: string;
  readonly process: ManagedProcess;
  stop(): Promise<void>;
}

/** registryConfig is the distribution registry's configuration: filesystem storage, deletes allowed, loopback only. */
export function registryConfig(storage: string, port: number): string {
  return [
    'version: 0.1',
    'log:',
    '  level: warn',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${JSON.stringify(storage)}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    '',
  ].join('\n');
}

/** startRegistry starts the registry and waits until GET /v2/ answers 200; retries once on a lost port race. */
export async function startRegistry(o: { dir: string; pidFile?: string }): Promise<Registry> {
  const bin = findBinary('registry');
  mkdirSync(join(o.dir, 'storage'), { recursive: true });
  let lastErr: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const config = join(o.dir, 'config.yml');
    writeFileSync(config, registryConfig(join(o.dir, 'storage'), port));
    const proc = spawnManaged('registry', bin, {
      args: ['serve', config],
      logFile: join(o.dir, 'registry.log'),
      // The registry reads OTEL_* and REGISTRY_* variables; give it none of ours.
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', OTEL_TRACES_EXPORTER: 'none' },
      ...(o.pidFile !== undefined ? { pidFile: o.pidFile } : {}),
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitHealthy(`${url}/v2/`, { timeoutMs: 20_000, alive: () => proc.isRunning(), what: 'registry' });
      return { host: `127.0.0.1:${port}`, url, dir: o.dir, process: proc, stop: () => proc.stop() };
    } catch (err) {
      await proc.stop();
      lastErr = new Error(`${(err as Error).message}\n--- registry.log ---\n${tailLog(proc.logFile)}`, {
        cause: err,
      });
    }
  }
  throw lastErr;
}
