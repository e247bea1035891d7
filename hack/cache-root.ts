/**
 * cache-root.ts — the one folder every cache of the project lives under: FENCEPOST_CACHE, or
 * `${XDG_CACHE_HOME:-~/.cache}/fencepost` (the shell scripts spell the same default). Outside the
 * repository, so that a fresh clone (CI) finds the builds, the image and the test-order record of
 * earlier runs on the same machine.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

/** cacheRoot is the cache folder (absolute). */
export function cacheRoot(): string {
  return (
    process.env['FENCEPOST_CACHE'] ?? join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'fencepost')
  );
}
