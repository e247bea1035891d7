/**
 * A release installed the way users install it. hack/release.sh publishes two versions into a
 * registry of our own on loopback (the CNCF distribution registry: image index by digest, SBOM
 * and signature as referrers, the chart as an OCI artifact); then, on a cluster whose pods pull
 * fencepost's image from that registry by digest — with FENCEPOST_E2E_RUNTIME=kubelet (what CI
 * runs) the real node's kubelet pulls it through containerd and runs it with runc, nothing of
 * fencepost's imported; otherwise kwok nodes and the pod runner, which pulls it and runs it under crun:
 * `helm install fencepost oci://…/charts/fencepost --version V1`, the first lock of the quick start
 * (examples/singleton-deployment.yaml), `helm upgrade` to V2 while the lock is held (the holder
 * keeps its token across the controller's rollout), and the uninstall docs/operations.md
 * documents, including a lock deleted after the controller is gone.
 *
 * `hack/npm run test:release` (builds registry, oras, syft and cosign first, once).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { GROUP, PLURAL, VERSION } from '../../src/api/v1alpha1/distributedlock.ts';
import { parseLease } from '../../src/lease/record.ts';
import { leaseName } from '../../src/protocol/names.ts';
import type { ReleaseResult } from '../../hack/release.ts';
import { pullImageRootfs } from '../support/image/archive.ts';
import { eventually } from '../support/env.ts';
import { findBinary } from '../support/testbed/assets.ts';
import { startRegistry, type Registry } from '../support/testbed/registry.ts';
import { ON_KUBELET, ROOT, SYSTEM_NAMESPACE, RELEASE, dumpDiagnostics, useE2eCluster } from '../e2e/e2e-cluster.ts';
import { believers, watchHolders } from '../e2e/holders.ts';

const run = promisify(execFile);
const NS = 'release-demo';
const LOCK = 'singleton';
const DEPLOYMENT = 'singleton-worker';
const CONTROLLER = 'fencepost';
// Prereleases of package.json's version: the image is built from this tree (release.sh refuses others).
const packageVersion = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const V1 = `${packageVersion}-e2e.1`;
const V2 = `${packageVersion}-e2e.2`;

describe(`a release from a registry: helm install ${V1}, first lock, helm upgrade to ${V2} with the lock held, uninstall`, () => {
  const work = mkdtempSync(join(tmpdir(), 'fencepost-release-'));
  let registry: Registry | undefined;
  const releases: ReleaseResult[] = [];
  const e = useE2eCluster([NS], [], {
    published: {
      publish: async () => {
        registry = await startRegistry({ dir: join(work, 'registry'), pidFile: join(work, 'pids') });
        for (const version of [V1, V2]) {
          const { stdout } = await run(join(ROOT, 'hack/release.sh'), [version, `${registry.host}/fencepost`], {
            cwd: ROOT,
            env: { ...process.env, FENCEPOST_RELEASE_OUT: join(work, version) },
            maxBuffer: 16 << 20,
          });
          releases.push(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as ReleaseResult);
        }
        const first = releases[0];
        if (first === undefined) throw new Error('no release published');
        return { chart: first.chart.reference, version: V1, registry: registry.host };
      },
      pull: pullImageRootfs,
    },
  });

  afterAll(async () => {
    await registry?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const release = (i: number): ReleaseResult => {
    const r = releases[i];
    if (r === undefined) throw new Error(`release ${i} was not published`);
    return r;
  };
  /** controllerImages lists the images of the running controller pods' spec (not terminating). */
  const controllerPods = async (): Promise<{ name: string; image: string }[]> =>
    (
      await e.core.listNamespacedPod({
        namespace: SYSTEM_NAMESPACE,
        labelSelector: 'app.kubernetes.io/component=controller',
      })
    ).items
      .filter((p) => p.metadata?.deletionTimestamp === undefined)
      .map((p) => ({ name: p.metadata?.name ?? '', image: p.spec?.containers[0]?.image ?? '' }));
  const oneHolder = async (): Promise<{ pod: string; token: string }> =>
    eventually(
      async () => {
        const held = await believers(e, NS, LOCK);
        expect(held).toHaveLength(1);
        const lease = parseLease(await e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) }));
        expect(lease.holder?.name).toBe(held[0]?.pod);
        expect(lease.token?.toString()).toBe(held[0]?.token);
        return held[0] ?? { pod: '', token: '' };
      },
      90_000,
      250,
    );
  /** imageIds are the imageID (what the runtime ran, by its registry digest) of each running controller pod. */
  const controllerImageIds = async (): Promise<string[]> =>
    (
      await e.core.listNamespacedPod({
        namespace: SYSTEM_NAMESPACE,
        labelSelector: 'app.kubernetes.io/component=controller',
      })
    ).items
      .filter((p) => p.metadata?.deletionTimestamp === undefined)
      .map((p) => p.status?.containerStatuses?.find((c) => c.name === 'controller')?.imageID ?? '');
  /**
   * pulledDigests are the registry digests containerd's image store holds for fencepost's
   * repository in the registry (`crictl images --digests`): an image there came from a pull.
   */
  const pulledDigests = (): string[] => {
    const images = JSON.parse(e.node.crictl(['images', '-o', 'json'])) as {
      images: { repoTags?: string[] | null; repoDigests?: string[] | null }[];
    };
    const repo = `${release(0).registry}/fencepost@`;
    return images.images
      .flatMap((i) => i.repoDigests ?? [])
      .filter((d) => d.startsWith(repo))
      .map((d) => d.slice(repo.length))
      .sort();
  };
  const lockExists = async (name: string): Promise<boolean> =>
    e.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: PLURAL, name }).then(
      () => true,
      () => false,
    );

  it('publishes each version as an image index by digest with its SBOM and signature attached, and the chart pinning it', () => {
    for (const [i, version] of [V1, V2].entries()) {
      const r = release(i);
      expect(r.version).toBe(version);
      expect(r.image).toMatch(new RegExp(`^${r.registry}/fencepost:${version}@sha256:[0-9a-f]{64}$`));
      expect(r.chart.reference).toBe(`oci://${r.registry}/charts/fencepost`);
      expect(r.chart.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(r.platforms.map((p) => p.platform)).toContain('linux/amd64');
      for (const p of r.platforms) {
        const types = p.referrers.map((x) => x.artifactType);
        expect(types, p.platform).toContain('application/vnd.cyclonedx+json');
        expect(
          types.some((t) => t.startsWith('application/vnd.dev.sigstore.bundle')),
          `${p.platform}: ${types.join(', ')}`,
        ).toBe(true);
      }
    }
    // Two versions of the same tree: the same platform manifests, two indexes (their version annotation).
    expect(release(1).platforms[0]?.digest).toBe(release(0).platforms[0]?.digest);
    expect(release(1).indexDigest).not.toBe(release(0).indexDigest);
  });

  it('publishes the library chart fencepost-sidecar, which an app chart depends on from oci:// and renders with the pinned image', async () => {
    const r = release(0);
    expect(r.sidecarChart.reference).toBe(`oci://${r.registry}/charts/fencepost-sidecar`);
    expect(r.sidecarChart.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const app = join(work, 'app-chart');
    mkdirSync(join(app, 'templates'), { recursive: true });
    writeFileSync(
      join(app, 'Chart.yaml'),
      `apiVersion: v2\nname: app\nversion: 0.0.1\ndependencies:\n  - name: fencepost-sidecar\n    version: ${V1}\n    repository: oci://${r.registry}/charts\n`,
    );
    writeFileSync(
      join(app, 'templates/pod.yaml'),
      'apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\nspec:\n  initContainers:\n    {{- include "fencepost-sidecar.container" (dict "locks" (list "billing")) | nindent 4 }}\n  containers: []\n',
    );
    const helm = async (args: readonly string[]): Promise<string> =>
      (await run(findBinary('helm'), args, { env: { ...process.env, HELM_CACHE_HOME: join(work, 'helm-cache') } }))
        .stdout;
    await helm(['dependency', 'update', '--plain-http', app]);
    const rendered = await helm(['template', 'app', app, '--kube-version', '1.36.0']);
    expect(rendered).toContain(`image: ${r.image}`);
    expect(await helm(['show', 'chart', '--plain-http', r.sidecarChart.reference, '--version', V1])).toMatch(
      /^type: library$/m,
    );
  });

  it(`helm install ${V1} from oci://: both controller replicas run the published image, pulled by digest`, async () => {
    const pods = await eventually(
      async () => {
        const p = await controllerPods();
        expect(p).toHaveLength(2);
        expect(await e.running(SYSTEM_NAMESPACE, 'controller')).toHaveLength(2);
        return p;
      },
      90_000,
      250,
    );
    for (const p of pods) expect(p.image).toBe(release(0).image);
    if (ON_KUBELET) {
      // The kubelet pulled it (containerd's CRI pull from the registry: nothing of fencepost's was
      // imported): the containers ran the image index of V1 by its registry digest.
      const index = `${release(0).registry}/fencepost@${release(0).indexDigest}`;
      expect(await controllerImageIds()).toEqual([index, index]);
      expect(pulledDigests()).toEqual([release(0).indexDigest]);
      // Plain HTTP as the node's hosts.toml says, not containerd's guess for a loopback host (HTTPS
      // first, HTTP after a TLS error), which it announces in its log.
      expect(readFileSync(e.node.containerd.logFile, 'utf8')).not.toContain('will try HTTPS first');
      process.stderr.write(`[release] crictl images --digests:\n${e.node.crictl(['images', '--digests'])}`);
    } else {
      // What the pod runner ran: the index resolved to this machine's platform manifest.
      expect(pullImageRootfs(release(0).image).digest).toBe(release(0).platforms[0]?.digest);
    }
    const values = await e.helm(['get', 'values', RELEASE, '-n', SYSTEM_NAMESPACE, '-o', 'json']);
    expect(values).not.toContain('image');
  });

  it('the first lock: examples/singleton-deployment.yaml gets exactly one holder with a token', async () => {
    const example = readFileSync(join(ROOT, 'examples/singleton-deployment.yaml'), 'utf8');
    const agentImage = /image: (ghcr\.io\/fencepost\/fencepost:\S+)/.exec(example)?.[1] ?? '';
    expect(agentImage).not.toBe('');
    // The sidecar runs the published image, as a user's copy of the example would after the release.
    const file = join(work, 'singleton.yaml');
    writeFileSync(file, example.replaceAll(agentImage, release(0).image));
    await e.kubectl(['apply', '-n', NS, '-f', file]);
    await e.kubectl(['rollout', 'status', '-n', NS, `deployment/${DEPLOYMENT}`, '--timeout=120s']);
    const holder = await oneHolder().catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await dumpDiagnostics(e, NS)}`);
    });
    expect(BigInt(holder.token)).toBeGreaterThan(0n);
  });

  it(`helm upgrade to ${V2} with the lock held: the controller rolls, the holder keeps its token`, async () => {
    const before = await oneHolder();
    const watch = watchHolders(e, NS, LOCK);
    await e.helm([
      'upgrade',
      RELEASE,
      release(1).chart.reference,
      '--version',
      V2,
      '-n',
      SYSTEM_NAMESPACE,
      '--reuse-values',
      '--wait',
      '--timeout',
      '180s',
    ]);
    await e.kubectl(['rollout', 'status', '-n', SYSTEM_NAMESPACE, `deployment/${CONTROLLER}`, '--timeout=180s']);
    await eventually(
      async () => {
        const p = await controllerPods();
        expect(p).toHaveLength(2);
        for (const x of p) expect(x.image).toBe(release(1).image);
      },
      90_000,
      250,
    );
    if (ON_KUBELET) {
      // V2's index was pulled too; its platform manifest is V1's, so containerd holds one image
      // under both registry digests and the pods' imageID names one of them.
      expect(pulledDigests()).toEqual([release(0).indexDigest, release(1).indexDigest].sort());
      const digests = [release(0).indexDigest, release(1).indexDigest].map(
        (d) => `${release(0).registry}/fencepost@${d}`,
      );
      for (const id of await controllerImageIds()) expect(digests).toContain(id);
    }
    // The new controllers lead and reconcile the lock: it stays with its holder.
    const after = await oneHolder();
    const report = await watch.stop();
    expect(after).toEqual(before);
    expect(report.terms.map((t) => [t.holder, t.token.toString()])).toEqual([[before.pod, before.token]]);
    expect(report.maxBelievers).toBe(1);
    expect(report.overlaps).toEqual([]);
  });

  it('uninstall as documented: locks deleted while the controller runs go at once; one deleted after it is gone waits on its finalizer until it is removed by hand', async () => {
    // A second lock, deleted first as docs/operations.md says: the controller cleans up.
    const second = join(work, 'second.yaml');
    writeFileSync(
      second,
      `apiVersion: ${GROUP}/${VERSION}\nkind: DistributedLock\nmetadata:\n  name: second\nspec:\n  mode: Mutex\n  candidates:\n    selector:\n      matchLabels:\n        app: second\n`,
    );
    await e.kubectl(['apply', '-n', NS, '-f', second]);
    await eventually(
      async () => {
        const lock = JSON.parse(await e.kubectl(['get', 'dlock', 'second', '-n', NS, '-o', 'json'])) as {
          metadata: { finalizers?: string[] };
        };
        expect(lock.metadata.finalizers).toContain('fencepost.io/lease-cleanup');
      },
      30_000,
      250,
    );
    await e.kubectl(['delete', 'dlock', 'second', '-n', NS, '--timeout=60s']);
    expect(await lockExists('second')).toBe(false);

    // The workloads go, then the chart.
    await e.kubectl(['delete', 'deployment', DEPLOYMENT, '-n', NS, '--timeout=120s']);
    await e.helm(['uninstall', RELEASE, '-n', SYSTEM_NAMESPACE, '--wait', '--timeout', '120s']);
    await eventually(
      async () => {
        expect(await controllerPods()).toEqual([]);
      },
      60_000,
      250,
    );
    // The CRD stays (crds.keep) and so does the lock: deleted now, nobody removes its finalizer.
    await e.kubectl(['delete', 'dlock', LOCK, '-n', NS, '--wait=false']);
    for (let i = 0; i < 3; i++) {
      const lock = JSON.parse(await e.kubectl(['get', 'dlock', LOCK, '-n', NS, '-o', 'json'])) as {
        metadata: { deletionTimestamp?: string; finalizers?: string[] };
      };
      expect(lock.metadata.deletionTimestamp).toBeDefined();
      expect(lock.metadata.finalizers).toEqual(['fencepost.io/lease-cleanup']);
      await new Promise((r) => setTimeout(r, 1000));
    }
    // The documented way out: remove the finalizer; the Lease follows its owner (garbage collector).
    await e.kubectl([
      'patch',
      'dlock',
      LOCK,
      '-n',
      NS,
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/metadata/finalizers"}]',
    ]);
    await eventually(
      async () => {
        expect(await lockExists(LOCK)).toBe(false);
        await expect(e.leases.readNamespacedLease({ namespace: NS, name: leaseName(LOCK) })).rejects.toThrow();
      },
      60_000,
      250,
    );
    await e.kubectl(['delete', 'crd', 'distributedlocks.fencepost.io', '--timeout=60s']);
    // Nothing of the chart is left, in its namespace, the app's, or cluster-wide.
    for (const [kinds, where] of [
      ['deployments,services,serviceaccounts,roles,rolebindings,poddisruptionbudgets', ['-n', SYSTEM_NAMESPACE]],
      ['serviceaccounts,roles,rolebindings', ['-n', NS]],
      ['clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings', []],
    ] as const) {
      const left = await e.kubectl(['get', kinds, ...where, '-l', 'app.kubernetes.io/part-of=fencepost', '-o', 'name']);
      expect(left.trim(), kinds).toBe('');
    }
  });
});
