/**
 * Vitest global setup for the e2e project: the run's one cluster, which the default-tier files
 * share (useSharedE2eCluster in e2e-cluster.ts). Booting a real node (containerd, the kubelet,
 * the image import) and installing the chart is most of a file's time, so it is done once per
 * run, here in vitest's main process, which outlives every test file; it is stopped (by PID, the
 * nodes' host changes undone) when the run ends. It boots on the first file's request, over
 * loopback HTTP, so a run of files that boot their own (node-loss, alone in the long tier) boots
 * nothing here; a failed boot answers every file with its error.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestProject } from 'vitest/node';
import { SHARED_NAMESPACES, SHARED_VALUES, bootE2eCluster, type Booted } from './cluster-boot.ts';

/** setup serves the shared cluster's facts and returns the teardown that stops it. */
export async function setup(project: TestProject): Promise<() => Promise<void>> {
  let booting: Promise<Booted> | undefined;
  const server = createServer((_req, res) => {
    booting ??= bootE2eCluster(SHARED_NAMESPACES, SHARED_VALUES);
    booting.then(
      (b) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(b.facts));
      },
      (err: unknown) => {
        res
          .writeHead(500, { 'content-type': 'text/plain' })
          .end(err instanceof Error ? (err.stack ?? err.message) : String(err));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  project.provide('e2eSharedCluster', `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/`);
  return async () => {
    server.close();
    const booted = await booting?.catch(() => undefined);
    await booted?.stop();
  };
}
