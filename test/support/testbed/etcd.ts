/** An etcd server for the test control plane, on free loopback ports, with its data in dir. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { findBinary } from './assets.ts';
import { waitHealthy } from './http-probe.ts';
import { freePort } from './ports.ts';
import { spawnManaged, tailLog, type ManagedProcess } from './processes.ts';

/** Etcd is a running etcd; stop() then start() brings it back with its data, on the same ports. */
export interface Etcd {
  readonly clientUrl: string;
  process(): ManagedProcess;
  /** stop sends SIGTERM, then SIGKILL after graceMs (default 5 s; etcd with clients attached often needs the SIGKILL). */
  stop(graceMs?: number): Promise<void>;
  start(): Promise<void>;
}

/** startEtcd starts etcd with fsync disabled (test data only) and waits until /health is ok. */
export async function startEtcd(dir: string, pidFile?: string): Promise<Etcd> {
  const bin = findBinary('etcd');
  const clientPort = await freePort();
  const peerPort = await freePort();
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const dataDir = join(dir, 'etcd-data');
  mkdirSync(dataDir, { recursive: true });
  let proc: ManagedProcess | undefined;
  const start = async (): Promise<void> => {
    proc = spawnManaged('etcd', bin, {
      args: [
        `--data-dir=${dataDir}`,
        '--name=testbed',
        `--listen-client-urls=${clientUrl}`,
        `--advertise-client-urls=${clientUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=testbed=${peerUrl}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
        '--quota-backend-bytes=8589934592',
      ],
      logFile: join(dir, 'etcd.log'),
      ...(pidFile !== undefined ? { pidFile } : {}),
    });
    const p = proc;
    try {
      await waitHealthy(`${clientUrl}/health`, { timeoutMs: 30_000, alive: () => p.isRunning(), what: 'etcd' });
    } catch (err) {
      await p.stop();
      throw new Error(`${(err as Error).message}\n--- etcd.log ---\n${tailLog(p.logFile)}`, { cause: err });
    }
  };
  await start();
  return {
    clientUrl,
    process: () => {
      if (proc === undefined) throw new Error('etcd not started');
      return proc;
    },
    stop: async (graceMs?: number) => {
      await proc?.stop(graceMs);
    },
    start,
  };
}
