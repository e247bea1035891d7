/**
 * The image cache's housekeeping. Every change of the image's inputs makes a new archive (about
 * 110 MiB) and, in the tests, a new unpacked root (about 290 MiB): without pruning, a machine that
 * builds every commit fills its disk. Only the newest few entries of a cache folder are kept.
 */
import { readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { cacheRoot } from '../cache-root.ts';

/** imageCacheDir is the image cache: builds, the base, buildah's storage, and the tests' unpacked roots. */
export function imageCacheDir(): string {
  return join(cacheRoot(), 'image');
}

/** touch marks a cache entry as just used, so that keepNewest keeps it. */
export function touch(path: string): void {
  const now = new Date();
  utimesSync(path, now, now);
}

/** keepNewest removes all but the `keep` most recently used entries of dir (names starting with '.' are work in progress). */
export function keepNewest(dir: string, keep: number): string[] {
  let entries: { name: string; used: number }[];
  try {
    entries = readdirSync(dir)
      .filter((name) => !name.startsWith('.'))
      .map((name) => ({ name, used: statSync(join(dir, name)).mtimeMs }));
  } catch {
    return [];
  }
  const removed = entries
    .sort((a, b) => b.used - a.used)
    .slice(keep)
    .map((e) => e.name);
  for (const name of removed) rmSync(join(dir, name), { recursive: true, force: true });
  return removed;
}
