/**
 * The build's inputs, hashed: the key of hack/build-image.sh's cache. Two builds with the same
 * key would produce the same image (the build is reproducible: fixed timestamps, no layer cache),
 * so a second run with nothing changed reuses the archive instead of building for minutes.
 *
 * The key covers what can change the bytes: every file of the build context that .dockerignore
 * lets through (path and content), the base image's reference, the build arguments, the builder's
 * version and the build script itself.
 */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { filesKey } from '../files-key.ts';
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
