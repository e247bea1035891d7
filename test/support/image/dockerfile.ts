/**
 * The Dockerfile without Docker: a parser for the instructions we use, a hadolint-style rule
 * checker, and a local builder that runs the Dockerfile's own COPY and RUN steps in a folder per
 * stage (absolute paths of a stage map into its folder), so that the image's build steps are
 * exercised on machines that have no Docker engine. Stages named `*-root` build the base's own
 * root filesystem (absolute paths by nature, the host is no stand-in for the base) and are skipped,
 * with every stage and COPY that takes from a skipped stage; the final stage's COPY steps assemble
 * the application tree. (hack/build-image.sh builds the real image with buildah.)
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { readDockerIgnore } from './dockerignore.ts';

/** Instruction is one Dockerfile instruction, continuation lines joined. */
export interface Instruction {
  readonly line: number;
  readonly keyword: string;
  readonly args: string;
}

/** Stage is one FROM and the instructions under it. */
export interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly line: number;
  readonly instructions: readonly Instruction[];
}

/**
 * parseDockerfile splits text into stages of instructions (comments and blank lines dropped). ARGs
 * before the first FROM are the global build arguments: a FROM's `${NAME}` or `$NAME` is replaced
 * by the ARG's default (or by `buildArgs`, as `--build-arg` would), so that rules see the base image.
 */
export function parseDockerfile(text: string, buildArgs: Readonly<Record<string, string>> = {}): Stage[] {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i] ?? '';
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.endsWith('\\') && i + 1 < lines.length) {
      i++;
      line = `${line.slice(0, -1)} ${(lines[i] ?? '').trim()}`;
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m === null) throw new Error(`Dockerfile:${start + 1}: cannot parse ${JSON.stringify(line)}`);
    instructions.push({ line: start + 1, keyword: (m[1] ?? '').toUpperCase(), args: (m[2] ?? '').trim() });
  }
  const stages: { image: string; name: string | undefined; line: number; instructions: Instruction[] }[] = [];
  const globalArgs = new Map<string, string>();
  const expand = (value: string, line: number): string =>
    value.replaceAll(
      /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
      (_m, braced?: string, bare?: string) => {
        const name = braced ?? bare ?? '';
        const v = buildArgs[name] ?? globalArgs.get(name);
        if (v === undefined)
          throw new Error(`Dockerfile:${line}: FROM uses $${name}, which no ARG before the first FROM declares`);
        return v;
      },
    );
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      const image = expand(m?.[1] ?? ins.args, ins.line);
      stages.push({ image, name: m?.[2], line: ins.line, instructions: [] });
    } else if (ins.keyword === 'ARG' && stages.length === 0) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$/.exec(ins.args);
      if (m === null) throw new Error(`Dockerfile:${ins.line}: cannot parse ARG ${ins.args}`);
      globalArgs.set(m[1] ?? '', (m[2] ?? '').replace(/^"(.*)"$/, '$1'));
    } else {
      const current = stages.at(-1);
      if (current === undefined) throw new Error(`Dockerfile:${ins.line}: ${ins.keyword} before FROM`);
      current.instructions.push(ins);
    }
  }
  return stages;
}

/**
 * locallySkipped names the stages the local replay cannot run: `*-root` stages (they carve the
 * base image's own files) and every stage that copies from a skipped one.
 */
export function locallySkipped(stages: readonly Stage[]): Set<string> {
  const skipped = new Set<string>();
  for (const s of stages) {
    const key = s.name ?? `@${s.line}`;
    if (s.name?.endsWith('-root') === true) skipped.add(key);
    const takesFromSkipped = s.instructions.some(
      (i) => i.keyword === 'COPY' && skipped.has(/^--from=(\S+)/.exec(i.args)?.[1] ?? ''),
    );
    if (takesFromSkipped && s.name !== undefined) skipped.add(key);
  }
  return skipped;
}

/** Finding is one rule violation. */
export interface Finding {
  readonly rule: string;
  readonly line: number;
  readonly message: string;
}

const SECRET_NAME = /(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|PRIVATE_KEY)/i;

/**
 * lintDockerfile checks the rules of a small production Node image (hadolint codes where one
 * exists): pinned base images (DL3006, DL3007), multi-stage, a numeric non-root USER in the final
 * stage, production dependencies with `npm ci --omit=dev` and never `npm install` (DL3016-like),
 * the lockfile copied before the sources (layer caching), COPY not ADD (DL3020), absolute WORKDIR
 * (DL3000), exec-form ENTRYPOINT/CMD (DL3025), no sudo (DL3004), no secrets in ENV or ARG, and
 * RUN steps of build stages free of absolute paths (the local builder runs them).
 */
export function lintDockerfile(text: string): Finding[] {
  const stages = parseDockerfile(text);
  const out: Finding[] = [];
  const add = (rule: string, line: number, message: string): void => {
    out.push({ rule, line, message });
  };
  const named = new Set(stages.map((s) => s.name).filter((n): n is string => n !== undefined));
  if (stages.length < 2) add('multi-stage', 1, 'build in one stage and copy the result into a clean runtime stage');
  const skipped = locallySkipped(stages);
  for (const s of stages) {
    if (named.has(s.image) || s.image === 'scratch') continue;
    const [ref = '', digest] = s.image.split('@');
    const tag = /^[^:]+(?::\d+)?(?:\/[^:]+)*:([^/:]+)$/.exec(ref)?.[1];
    if (digest === undefined && tag === undefined) add('DL3006', s.line, `base image ${s.image} has no tag: pin it`);
    if (tag === 'latest') add('DL3007', s.line, `base image ${s.image} uses latest: pin a version`);
    if (tag !== undefined && !/^\d+\.\d+\.\d+/.test(tag))
      add('pinned-version', s.line, `base image ${s.image}: pin a full version (x.y.z), not a moving tag`);
    if (!/^sha256:[0-9a-f]{64}$/.test(digest ?? ''))
      add(
        'pinned-digest',
        s.line,
        `base image ${s.image}: pin it by digest (name:x.y.z@sha256:…): a tag can be pushed again with other bytes`,
      );
  }
  for (const [index, s] of stages.entries()) {
    const final = index === stages.length - 1;
    let lockCopied = false;
    for (const ins of s.instructions) {
      if (ins.keyword === 'ADD') add('DL3020', ins.line, 'use COPY instead of ADD');
      if (ins.keyword === 'WORKDIR' && !ins.args.startsWith('/'))
        add('DL3000', ins.line, `WORKDIR ${ins.args} is not absolute`);
      if ((ins.keyword === 'ENTRYPOINT' || ins.keyword === 'CMD') && !ins.args.startsWith('['))
        add('DL3025', ins.line, `${ins.keyword} must use the exec (JSON) form`);
      if ((ins.keyword === 'ENV' || ins.keyword === 'ARG') && SECRET_NAME.test(ins.args))
        add('no-secrets', ins.line, `${ins.keyword} looks like a secret: pass secrets at run time`);
      if (ins.keyword === 'COPY' && /package-lock\.json/.test(ins.args)) lockCopied = true;
      if (
        ins.keyword === 'COPY' &&
        !ins.args.startsWith('--from') &&
        /(^|\s)(src\/?|\.)(\s|$)/.test(ins.args) &&
        !lockCopied
      )
        add(
          'lockfile-first',
          ins.line,
          'copy package.json and package-lock.json and install before copying the sources',
        );
      if (ins.keyword === 'RUN') {
        if (/\bsudo\b/.test(ins.args)) add('DL3004', ins.line, 'do not use sudo');
        if (/\bnpm\s+(install|i)\b/.test(ins.args))
          add('npm-ci', ins.line, 'use npm ci (the lockfile, exactly), not npm install');
        if (!final && !skipped.has(s.name ?? '') && /(^|\s)\/[A-Za-z]/.test(ins.args))
          add(
            'relative-run',
            ins.line,
            'RUN steps of build stages use paths relative to WORKDIR (the local builder runs them)',
          );
      }
    }
    if (final) {
      const users = s.instructions.filter((i) => i.keyword === 'USER');
      const user = users.at(-1);
      if (user === undefined) add('non-root', s.line, 'the final stage must set USER');
      else if (!/^[1-9]\d*(:[1-9]\d*)?$/.test(user.args))
        add(
          'non-root',
          user.line,
          `USER ${user.args}: use a numeric non-root uid:gid (runAsNonRoot can only verify numbers)`,
        );
      if (!s.instructions.some((i) => i.keyword === 'ENTRYPOINT'))
        add('entrypoint', s.line, 'the final stage needs an ENTRYPOINT');
    }
  }
  if (!stages.some((s) => s.instructions.some((i) => i.keyword === 'RUN' && /\bnpm ci\b.*--omit=dev/.test(i.args))))
    add('omit-dev', 1, 'install production dependencies with npm ci --omit=dev');
  return out;
}

/** BuildOptions configures buildLocally. */
export interface BuildOptions {
  /** context is the build context (the repository). */
  readonly context: string;
  /** dir receives one folder per stage; the final stage's folder is the image's filesystem (our part of it). */
  readonly dir: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly log?: (line: string) => void;
}

/** buildLocally runs the Dockerfile's steps as described above and returns the final stage's root folder. */
export function buildLocally(dockerfile: string, o: BuildOptions): string {
  const stages = parseDockerfile(readFileSync(dockerfile, 'utf8'));
  // The context as a builder sends it: what .dockerignore excludes is not there to COPY.
  const ignore = readDockerIgnore(o.context);
  const inContext = (src: string): boolean => ignore.included(relative(o.context, src));
  const roots = new Map<string, string>();
  const skipped = locallySkipped(stages);
  let finalRoot = '';
  for (const [index, s] of stages.entries()) {
    const final = index === stages.length - 1;
    if (!final && skipped.has(s.name ?? '')) {
      o.log?.(`skip stage ${s.name ?? index} (the base image's own files, or built from them)`);
      continue;
    }
    const root = join(o.dir, s.name ?? `stage${index}`);
    mkdirSync(root, { recursive: true });
    if (s.name !== undefined) roots.set(s.name, root);
    const inRoot = (path: string, cwd: string): string => (isAbsolute(path) ? join(root, path) : resolve(cwd, path));
    let cwd = root;
    for (const ins of s.instructions) {
      switch (ins.keyword) {
        case 'WORKDIR':
          cwd = inRoot(ins.args, cwd);
          mkdirSync(cwd, { recursive: true });
          break;
        case 'COPY': {
          const parts = ins.args.split(/\s+/);
          const from = /^--from=(\S+)$/.exec(parts[0] ?? '')?.[1];
          const paths = from !== undefined ? parts.slice(1) : parts;
          const dest = paths.pop() ?? '.';
          if (from !== undefined && skipped.has(from)) {
            o.log?.(`skip (from skipped stage ${from}): COPY ${ins.args}`);
            break;
          }
          const fromRoot = from !== undefined ? roots.get(from) : undefined;
          if (from !== undefined && fromRoot === undefined) throw new Error(`Dockerfile:${ins.line}: no stage ${from}`);
          // Docker's rules: a directory's contents go into dest; a file goes into dest/ when dest
          // ends with a slash or several sources are given, else it becomes dest.
          for (const p of paths) {
            const src = fromRoot !== undefined ? join(fromRoot, p) : join(o.context, p);
            if (fromRoot === undefined && !inContext(src))
              throw new Error(
                `Dockerfile:${ins.line}: COPY ${p}: excluded by .dockerignore (not in the build context)`,
              );
            const destPath = inRoot(dest, cwd);
            if (statSync(src).isDirectory()) {
              cpSync(src, destPath, { recursive: true, filter: (f) => fromRoot !== undefined || inContext(f) });
              continue;
            }
            const target = dest.endsWith('/') || paths.length > 1 ? join(destPath, basename(p)) : destPath;
            mkdirSync(dirname(target), { recursive: true });
            cpSync(src, target);
          }
          break;
        }
        case 'RUN':
          if (final) {
            o.log?.(`skip (final stage, changes the base image): RUN ${ins.args}`);
            break;
          }
          o.log?.(`RUN ${ins.args}`);
          execFileSync('sh', ['-c', ins.args], { cwd, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
          break;
        default:
          break; // ENV, USER, ENTRYPOINT, CMD, ARG: metadata, nothing to build
      }
    }
    if (final) finalRoot = root;
  }
  return finalRoot;
}
