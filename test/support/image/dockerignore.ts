/**
 * .dockerignore as Docker applies it to a build context, so that the local builder (dockerfile.ts)
 * sees the same files a `docker build` or `buildah build` would: a COPY of an excluded path fails
 * there ("excluded by .dockerignore"), and must fail here too, or a Dockerfile that only works
 * without the ignore file ships unnoticed (it did: hack/build-agent.ts was copied but excluded).
 *
 * The rules (Docker's): one pattern per line, `#` comments, `!` re-includes; the last pattern that
 * matches a path decides; a pattern matches a path or any of its parent folders; `*` and `?` stay
 * within one path segment, `**` crosses segments; leading and trailing slashes are dropped.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Rule {
  readonly exclude: boolean;
  readonly pattern: RegExp;
}

/** DockerIgnore says whether a context-relative path is sent to the build. */
export interface DockerIgnore {
  readonly included: (path: string) => boolean;
}

/** parseDockerIgnore compiles the text of a .dockerignore file. */
export function parseDockerIgnore(text: string): DockerIgnore {
  const rules: Rule[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    const body = clean(negated ? line.slice(1).trim() : line);
    if (body === '') continue;
    rules.push({ exclude: !negated, pattern: toRegExp(body) });
  }
  return {
    included(path: string): boolean {
      const p = clean(path);
      const prefixes = p.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/'));
      let excluded = false;
      for (const r of rules) if (prefixes.some((x) => r.pattern.test(x))) excluded = r.exclude;
      return !excluded;
    },
  };
}

/** readDockerIgnore reads context/.dockerignore; without one every path is included. */
export function readDockerIgnore(context: string): DockerIgnore {
  const file = join(context, '.dockerignore');
  return parseDockerIgnore(existsSync(file) ? readFileSync(file, 'utf8') : '');
}

function clean(path: string): string {
  return path.replace(/^\.\//, '').replace(/^\/+|\/+$/g, '');
}

function toRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob.charAt(i);
    if (c === '*' && glob.charAt(i + 1) === '*') {
      re += '.*';
      i++;
      if (glob.charAt(i + 1) === '/') i++; // `**/` also matches no folder at all
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}
