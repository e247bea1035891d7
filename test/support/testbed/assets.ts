/**
 * Where the testbed finds its binaries, following the envtest convention: TEST_ASSET_<NAME>,
 * then $KUBEBUILDER_ASSETS/<name>, then /usr/local/kubebuilder/bin/<name>. When none of them
 * has it, the folder that hack/testbed/build.sh fills is tried last, so that a plain
 * `vitest run` after one `hack/testbed/build.sh` works.
 */
import { accessSync, constants } from 'node:fs';
import { cacheRoot } from '../../../hack/cache-root.ts';
import { join } from 'node:path';

/** KUBE_VERSION and ETCD_VERSION are the releases hack/testbed/build.sh pins (keep in step). */
export const KUBE_VERSION = 'v1.36.3';
export const ETCD_VERSION = 'v3.6.16';

/** buildCacheAssets is the KUBEBUILDER_ASSETS folder that hack/testbed/build.sh writes. */
export function buildCacheAssets(): string {
  return join(cacheRoot(), 'assets', `kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}`);
}

/** executable reports whether path is a file this process may execute. */
export function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** findBinary returns the path of a testbed binary, or throws naming every place it looked. */
export function findBinary(name: string): string {
  const envName = `TEST_ASSET_${name.toUpperCase().replace(/-/g, '_')}`;
  const candidates: string[] = [];
  const direct = process.env[envName];
  if (direct !== undefined && direct !== '') candidates.push(direct);
  const assets = process.env['KUBEBUILDER_ASSETS'];
  if (assets !== undefined && assets !== '') candidates.push(join(assets, name));
  candidates.push(join('/usr/local/kubebuilder/bin', name), join(buildCacheAssets(), name));
  for (const c of candidates) if (executable(c)) return c;
  throw new Error(
    `Testbed binary '${name}' not found (looked in ${envName}, KUBEBUILDER_ASSETS, /usr/local/kubebuilder/bin, ` +
      `${buildCacheAssets()}). Build it with: hack/testbed/build.sh ${name}`,
  );
}
