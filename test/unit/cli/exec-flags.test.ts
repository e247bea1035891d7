/**
 * `fencepost exec`'s command line (src/cli/exec-flags.ts): --if-held, several --lock, the token
 * variables and the command's environment. Pure; the integration tests run the real command.
 */
import { describe, expect, it } from 'vitest';
import { commandEnv, parseExecArgs, tokenEnvClash, tokenEnvName } from '../../../src/cli/exec-flags.ts';
import { UsageError } from '../../../src/config/usage-error.ts';

const refusal = (argv: string[]): string => {
  try {
    parseExecArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('parseExecArgs', () => {
  it('--store: the URL, --ttl and --namespace, and no Lease option', () => {
    const o = parseExecArgs([
      '--store',
      'redis://127.0.0.1:6379',
      '--ttl',
      '2s',
      '--namespace',
      'jobs',
      '--lock',
      'db',
      '--',
      'true',
    ]);
    expect(o).toMatchObject({
      store: 'redis://127.0.0.1:6379',
      ttlMs: 2000,
      namespace: 'jobs',
      kubeconfig: undefined,
      runId: undefined,
    });
    expect(parseExecArgs(['--lock', 'db', '--', 'true'])).toMatchObject({
      store: undefined,
      ttlMs: undefined,
      namespace: undefined,
    });
  });

  it.each([
    { argv: ['--store', 'redis://h:0'], line: '--store: port 0 is not in 1..65535, got "redis://h:0"' },
    {
      argv: ['--store', 'redlock://u:secret@h1,h2'],
      line: '--store: redlock:// needs at least 3 independent masters (5 is usual), not 2, got "redlock://u:***@h1,h2"',
    },
    {
      argv: ['--store', 'redis://h', '--run-id', 'r1'],
      line: '--run-id: not with --store: a completed run is recorded on a Kubernetes Lease',
    },
    {
      argv: ['--store', 'redis://h', '--kubeconfig', '/k'],
      line: '--kubeconfig: not with --store: a store lock needs no Kubernetes',
    },
    { argv: ['--store', 'redis://h', '--ttl', '100ms'], line: '--ttl: must be from 300ms to 24h, got "100ms"' },
    { argv: ['--store', 'redis://h', '--ttl', '25h'], line: '--ttl: must be from 300ms to 24h, got "25h"' },
    {
      argv: ['--store', 'redis://h', '--namespace', 'Jobs'],
      line: '--namespace: must be a DNS label (a-z, 0-9, -; at most 63), got "Jobs"',
    },
    {
      argv: ['--ttl', '2s'],
      line: '--ttl: only with --store (a Lease lock takes its timings from the DistributedLock)',
    },
    {
      argv: ['--namespace', 'jobs'],
      line: "--namespace: only with --store (a Lease lock is in the pod's namespace, POD_NAMESPACE)",
    },
  ])('refuses $line', ({ argv, line }) => {
    expect(refusal([...argv, '--lock', 'db', '--', 'true'])).toBe(line);
  });

  it('defaults --if-held to wait, what exec always did', () => {
    const o = parseExecArgs(['--lock', 'db', '--', 'true']);
    expect(o).toMatchObject({ locks: ['db'], ifHeld: 'wait', waitMs: undefined, command: ['true'] });
  });

  it.each(['wait', 'skip', 'fail'] as const)('accepts --if-held %s', (p) => {
    expect(parseExecArgs(['--lock', 'db', '--if-held', p, '--', 'true']).ifHeld).toBe(p);
  });

  it('keeps every --lock, in the order given, and the command with its own flags', () => {
    const o = parseExecArgs(['--lock', 'b', '--lock=a', '--wait', '5s', '--', 'sh', '-c', 'x --lock c']);
    expect(o.locks).toEqual(['b', 'a']);
    expect(o.waitMs).toBe(5000);
    expect(o.command).toEqual(['sh', '-c', 'x --lock c']);
  });

  it.each([
    {
      argv: ['--lock', 'db', '--if-held', 'maybe', '--', 'true'],
      line: '--if-held: must be wait, skip or fail, got "maybe"',
    },
    {
      argv: ['--lock', 'db', '--if-held', 'Skip', '--', 'true'],
      line: '--if-held: must be wait, skip or fail, got "Skip"',
    },
    { argv: ['--', 'true'], line: '--lock: required' },
    { argv: ['--lock=', '--', 'true'], line: '--lock: must not be empty' },
    { argv: ['--lock', 'a', '--lock', 'b', '--lock', 'a', '--', 'true'], line: '--lock: "a" is given twice' },
    {
      argv: ['--lock', 'db.main', '--lock', 'db-main', '--', 'true'],
      line: '--lock: "db.main" and "db-main" would both set FENCEPOST_TOKEN_DB_MAIN; give locks whose names differ in more than case and punctuation',
    },
    {
      argv: ['--lock', 'a', '--lock', 'b', '--run-id', 'r1', '--', 'true'],
      line: "--run-id: takes one --lock (a run is recorded on one lock's Lease), got 2",
    },
    {
      argv: ['--lock', 'a', '--lock', 'b'],
      line: '--: missing, or no command after it; usage: fencepost exec --lock NAME [--lock NAME...] -- CMD [ARGS...]',
    },
    {
      argv: ['--lock', 'a', '--'],
      line: '--: missing, or no command after it; usage: fencepost exec --lock NAME [--lock NAME...] -- CMD [ARGS...]',
    },
    {
      argv: ['--lock', 'a', '--wait', 'soon', '--', 'true'],
      line: '--wait: invalid duration "soon" (use e.g. 500ms, 10s, 2m, 1h30m)',
    },
  ])('refuses $argv naming the flag', ({ argv, line }) => {
    expect(refusal(argv)).toBe(line);
  });
});

describe('tokenEnvName', () => {
  it.each([
    ['db', 'FENCEPOST_TOKEN_DB'],
    ['db-migrate', 'FENCEPOST_TOKEN_DB_MIGRATE'],
    ['cron-2024', 'FENCEPOST_TOKEN_CRON_2024'],
    ['a.b_c', 'FENCEPOST_TOKEN_A_B_C'],
    ['Ünïcode', 'FENCEPOST_TOKEN__N_CODE'],
  ])('maps %s to %s', (lock, name) => {
    expect(tokenEnvName(lock)).toBe(name);
  });

  it('is one to one on lock names (DNS labels): only names that are no lock can clash', () => {
    expect(tokenEnvClash(['db-a', 'db-b', 'dba', 'd-ba'])).toBeUndefined();
    expect(tokenEnvClash(['DB', 'x', 'db'])).toEqual(['DB', 'db']);
  });
});

describe('commandEnv', () => {
  const base = { PATH: '/bin', FENCEPOST_LOCK: 'outer', FENCEPOST_TOKEN: '1' };

  it('with one lock, sets the single-lock variables as before, and the per-lock one', () => {
    expect(commandEnv(base, [{ lock: 'db', token: 42n }])).toEqual({
      PATH: '/bin',
      FENCEPOST_LOCK: 'db',
      FENCEPOST_TOKEN: '42',
      FENCEPOST_LOCKS: 'db',
      FENCEPOST_TOKEN_DB: '42',
    });
  });

  it("with several, sets each lock's token, lists the locks, and unsets an outer exec's single-lock variables", () => {
    const tokens = [
      { lock: 'a', token: 9007199254740993n },
      { lock: 'b-2', token: 7n },
    ];
    expect(commandEnv(base, tokens)).toEqual({
      PATH: '/bin',
      FENCEPOST_LOCKS: 'a b-2',
      FENCEPOST_TOKEN_A: '9007199254740993',
      FENCEPOST_TOKEN_B_2: '7',
    });
  });

  it("passes a Semaphore's permit number: FENCEPOST_PERMIT_<LOCK>, and FENCEPOST_PERMIT with one lock", () => {
    const outer = { ...base, FENCEPOST_PERMIT: '4' };
    expect(commandEnv(outer, [{ lock: 'workers', token: 12n, permit: 1 }])).toEqual({
      PATH: '/bin',
      FENCEPOST_LOCK: 'workers',
      FENCEPOST_TOKEN: '12',
      FENCEPOST_PERMIT: '1',
      FENCEPOST_LOCKS: 'workers',
      FENCEPOST_TOKEN_WORKERS: '12',
      FENCEPOST_PERMIT_WORKERS: '1',
    });
    // With several (or an Election/Mutex lock) no FENCEPOST_PERMIT, not even an outer exec's.
    expect(
      commandEnv(outer, [
        { lock: 'db', token: 3n },
        { lock: 'workers', token: 12n, permit: 0 },
      ]),
    ).toEqual({
      PATH: '/bin',
      FENCEPOST_LOCKS: 'db workers',
      FENCEPOST_TOKEN_DB: '3',
      FENCEPOST_TOKEN_WORKERS: '12',
      FENCEPOST_PERMIT_WORKERS: '0',
    });
  });
});
