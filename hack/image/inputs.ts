/**
 * The build's inputs, hashed: the key of hack/build-image.sh's cache. Two builds with the same
 * key would produce the same image (the build is reproducible: fixed timestamps, no layer cache),
 * so a second run with nothing changed reuses the archive instead of building for minutes.
 *
 * The key covers what can change the bytes: every file of the build context that .dockerignore
 * lets through (path and content), the base image's reference, the build arguments, the builder's
 * version and the build script itself.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { readDockerIgnore } from '../../test/support/image/dockerignore.ts';

// Never part of our context and large: not walked at all (.dockerignore excludes them anyway).
const NEVER_SENT = new Set(['.git', 'node_modules', 'dist', '.testbed', 'coverage']);

/** contextFiles lists the context-relative paths a builder would send, sorted. */
export function contextFiles(context: string): string[] {
  const ignore = readDockerIgnore(context);
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (NEVER_SENT.has(e.name)) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (ignore.included(relative(context, path))) out.push(relative(context, path));
    }
  };
  walk(context);
  return out.sort();
}

/** BuildInputs is everything besides the context that goes into the key. */
export interface BuildInputs {
  readonly context: string;
  /** extraFiles are hashed like context files (the build script, Dockerfile, .dockerignore). */
  readonly extraFiles: readonly string[];
  /** values are the base reference, build arguments and tool versions, as name=value. */
  readonly values: Readonly<Record<string, string>>;
}

/** inputKey is the hex sha256 of the inputs: each as a length-prefixed record, so no two sets collide. */
export function inputKey(inputs: BuildInputs): string {
  const files = [...new Set([...contextFiles(inputs.context), ...inputs.extraFiles])];
  return filesKey(inputs.context, files, inputs.values);
}

/**
 * filesKey is the hex sha256 of files (paths relative to root, hashed with their content, in sorted
 * order) and values (name=value, sorted by name), each as a length-prefixed record so that no two
 * sets collide: the key of every build cache here (the image, the agent executable, the Java
 * client's test build).
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
