/**
 * files-key.ts — the key of every build cache here (the image's inputs, the agent executable, the
 * Java client's test build): a sha256 over files and values. Node's modules only, so that the
 * agent's build script can import it inside the image build, where the rest of hack/ is not.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * filesKey is the hex sha256 of files (paths relative to root, hashed with their content, in sorted
 * order) and values (name=value, sorted by name), each as a length-prefixed record so that no two
 * sets collide.
 */
export function filesKey(root: string, files: readonly string[], values: Readonly<Record<string, string>>): string {
  const h = createHash('sha256');
  const record = (kind: string, name: string, body: Buffer | string): void => {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    h.update(`${kind} ${name.length}:${name} ${bytes.length}:`);
    h.update(bytes);
  };
  for (const f of [...files].sort()) record('file', f, readFileSync(join(root, f)));
  for (const k of Object.keys(values).sort()) record('value', k, values[k] ?? '');
  return h.digest('hex');
}

/** filesUnder lists every file under root/dir, as paths relative to root, sorted. */
export function filesUnder(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}
