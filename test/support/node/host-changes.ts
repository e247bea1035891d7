/**
 * The host changes a real node makes — sysctls, network interfaces, iptables rules and chains,
 * cgroups, mounts — recorded in a ledger file in the node's folder before each is made, and undone
 * in reverse order on teardown. A crashed run leaves its ledger behind, so the next run (or
 * `npm run testbed:down`) undoes what it did: undoHostChanges is idempotent and reads only the
 * ledger, never guesses.
 *
 * iptables is recorded as a snapshot of `iptables-save` taken before the node starts: on teardown
 * every rule and chain that is in the tables now but was not in the snapshot is deleted. That
 * covers our own chain, the kubelet's canary chains and the CNI plugins' masquerade and hostport
 * chains alike, without knowing their names.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

/** Change is one ledger line. */
export type Change =
  | { readonly kind: 'sysctl'; readonly key: string; readonly before: string }
  | { readonly kind: 'link'; readonly name: string }
  | { readonly kind: 'iptables'; readonly snapshot: string }
  | { readonly kind: 'cgroup'; readonly name: string }
  | { readonly kind: 'mounts-under'; readonly dir: string }
  | { readonly kind: 'created-dir'; readonly path: string };

/** LEDGER is the ledger's file name in a node folder. */
export const LEDGER = 'host-changes.jsonl';

function sh(cmd: string, args: readonly string[]): string {
  return execFileSync(cmd, [...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** HostChanges records changes in dir's ledger and makes them. */
export class HostChanges {
  private readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  private record(c: Change): void {
    appendFileSync(join(this.dir, LEDGER), `${JSON.stringify(c)}\n`);
  }

  /** sysctl sets key to value, recording its value before (once: a second call keeps the first). */
  sysctl(key: string, value: string): void {
    const path = `/proc/sys/${key.replace(/\./g, '/')}`;
    const before = readFileSync(path, 'utf8').trim();
    if (!this.recorded().some((c) => c.kind === 'sysctl' && c.key === key))
      this.record({ kind: 'sysctl', key, before });
    sh('sysctl', ['-qw', `${key}=${value}`]);
  }

  /** recordSysctls records keys' current values so that teardown restores them (for sysctls the kubelet sets). */
  recordSysctls(keys: readonly string[]): void {
    for (const key of keys) {
      const path = `/proc/sys/${key.replace(/\./g, '/')}`;
      if (existsSync(path)) this.record({ kind: 'sysctl', key, before: readFileSync(path, 'utf8').trim() });
    }
  }

  /** bridge creates a bridge interface with address cidr, up. */
  bridge(name: string, cidr: string): void {
    this.record({ kind: 'link', name });
    sh('ip', ['link', 'add', name, 'type', 'bridge']);
    sh('ip', ['addr', 'add', cidr, 'dev', name]);
    sh('ip', ['link', 'set', name, 'up']);
  }

  /** snapshotIptables records the current rules: teardown deletes whatever was added since. */
  snapshotIptables(): void {
    this.record({ kind: 'iptables', snapshot: sh('iptables-save', []) });
  }

  /** iptables runs one iptables command (after snapshotIptables, so teardown undoes it). */
  iptables(args: readonly string[]): void {
    sh('iptables', ['-w', ...args]);
  }

  /**
   * cgroup creates a cgroup (a folder in every v1 hierarchy: the kubelet refuses a cgroup root
   * that does not exist), removed on teardown with everything below it. cpuset gets its parent's
   * cpus and mems, without which no process could join it.
   */
  cgroup(name: string): void {
    this.record({ kind: 'cgroup', name });
    for (const h of readdirSync('/sys/fs/cgroup')) {
      const root = join('/sys/fs/cgroup', h);
      if (h === 'unified' || !existsSync(join(root, 'cgroup.procs'))) continue;
      mkdirSync(join(root, name), { recursive: true });
      if (h === 'cpuset')
        for (const f of ['cpuset.cpus', 'cpuset.mems'])
          writeFileSync(join(root, name, f), readFileSync(join(root, f), 'utf8'));
    }
  }

  /**
   * sharedDir records a host folder that something we start creates (containerd's shims put their
   * sockets in /run/containerd/s as root, whatever the configuration), if it does not exist yet:
   * teardown deletes the sockets in it that nobody listens on and then the folder, if empty.
   */
  sharedDir(path: string): void {
    if (!existsSync(path)) this.record({ kind: 'created-dir', path });
  }

  /** mountsUnder records that every mount below dir is to be unmounted on teardown. */
  mountsUnder(dir: string): void {
    this.record({ kind: 'mounts-under', dir });
  }

  recorded(): Change[] {
    return readLedger(this.dir);
  }
}

function readLedger(dir: string): Change[] {
  const file = join(dir, LEDGER);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Change);
}

/** mountsBelow lists mount points at or below dir, deepest first. */
export function mountsBelow(dir: string): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => (l.split(' ')[4] ?? '').replace(/\\040/g, ' '))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

interface Rules {
  /** chains are the table's user-defined chains. */
  readonly chains: Set<string>;
  readonly rules: string[];
}

/** parseSave splits `iptables-save` output by table: its chain names and rule lines (-A …). */
function parseSave(text: string): Map<string, Rules> {
  const tables = new Map<string, Rules>();
  let current: Rules | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('*')) {
      current = { chains: new Set(), rules: [] };
      tables.set(line.slice(1), current);
    } else if (line.startsWith(':')) {
      // Only user-defined chains (policy "-"): a built-in chain is never flushed or deleted.
      const [name, policy] = line.slice(1).split(' ');
      if (policy === '-') current?.chains.add(name ?? '');
    } else if (line.startsWith('-A ')) current?.rules.push(line);
  }
  return tables;
}

/**
 * iptablesUndo lists the iptables commands (table, then arguments) that take the tables from now
 * back to snapshot: every rule not in the snapshot deleted, newest first, then every chain not in
 * it flushed and deleted. Both texts are `iptables-save` output.
 */
export function iptablesUndo(snapshot: string, now: string): { table: string; args: string[] }[] {
  const out: { table: string; args: string[] }[] = [];
  const before = parseSave(snapshot);
  for (const [table, rules] of parseSave(now)) {
    const old = before.get(table) ?? { chains: new Set<string>(), rules: [] };
    const oldRules = new Set(old.rules);
    for (const rule of [...rules.rules].reverse()) {
      if (oldRules.has(rule)) continue;
      // iptables-save quotes an argument with spaces and escapes its quotes (the CNI comments).
      const words = (rule.match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? []).map((w) =>
        w.startsWith('"') ? w.slice(1, -1).replace(/\\(.)/g, '$1') : w,
      );
      out.push({ table, args: ['-D', ...words.slice(1)] });
    }
    for (const chain of rules.chains) {
      if (old.chains.has(chain)) continue;
      out.push({ table, args: ['-F', chain] }, { table, args: ['-X', chain] });
    }
  }
  return out;
}

/** undoIptables deletes every rule and chain not in the snapshot. */
function undoIptables(snapshot: string): string[] {
  const problems: string[] = [];
  for (const { table, args } of iptablesUndo(snapshot, sh('iptables-save', []))) {
    const r = spawnSync('iptables', ['-w', '-t', table, ...args], { encoding: 'utf8' });
    if (r.status !== 0 && args[0] !== '-F') problems.push(`iptables -t ${table} ${args.join(' ')}: ${r.stderr.trim()}`);
  }
  return problems;
}

/** removeStaleDir deletes the unix sockets below path that no process listens on, then the empty folders. */
function removeStaleDir(path: string): string[] {
  if (!existsSync(path)) return [];
  const listening = new Set(
    readFileSync('/proc/net/unix', 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[7] ?? '')
      .filter((p) => p.startsWith('/')),
  );
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isSocket() && !listening.has(p)) rmSync(p, { force: true });
    }
    try {
      rmdirSync(dir);
    } catch {
      /* not empty: another node's sockets, left alone */
    }
  };
  walk(path);
  return [];
}

/** removeCgroup removes a cgroup folder tree in every v1 hierarchy (and v2), leaves first. */
function removeCgroup(name: string): string[] {
  const problems: string[] = [];
  const rm = (path: string): void => {
    if (!existsSync(path)) return;
    for (const e of readdirSync(path)) {
      const p = join(path, e);
      if (statSync(p).isDirectory()) rm(p);
    }
    try {
      rmdirSync(path);
    } catch (err) {
      problems.push(`rmdir ${path}: ${String(err)}`);
    }
  };
  for (const h of readdirSync('/sys/fs/cgroup')) rm(join('/sys/fs/cgroup', h, name));
  return problems;
}

/**
 * undoHostChanges undoes dir's ledger in reverse order and retires it (renamed to .undone), and
 * returns what could not be undone (empty when all went). Processes must be stopped first.
 */
export function undoHostChanges(dir: string): string[] {
  const changes = readLedger(dir);
  const problems: string[] = [];
  for (const c of [...changes].reverse()) {
    switch (c.kind) {
      case 'sysctl': {
        const r = spawnSync('sysctl', ['-qw', `${c.key}=${c.before}`], { encoding: 'utf8' });
        if (r.status !== 0) problems.push(`sysctl ${c.key}=${c.before}: ${r.stderr.trim()}`);
        break;
      }
      case 'link':
        spawnSync('ip', ['link', 'del', c.name]);
        break;
      case 'iptables':
        problems.push(...undoIptables(c.snapshot));
        break;
      case 'cgroup':
        problems.push(...removeCgroup(c.name));
        break;
      case 'created-dir':
        problems.push(...removeStaleDir(c.path));
        break;
      case 'mounts-under':
        for (const m of mountsBelow(c.dir)) {
          const r = spawnSync('umount', [m], { encoding: 'utf8' });
          if (r.status !== 0) {
            const lazy = spawnSync('umount', ['-l', m], { encoding: 'utf8' });
            if (lazy.status !== 0) problems.push(`umount ${m}: ${r.stderr.trim()}`);
          }
        }
        break;
    }
  }
  if (changes.length > 0 && problems.length === 0) renameSync(join(dir, LEDGER), join(dir, `${LEDGER}.undone`));
  return problems;
}
