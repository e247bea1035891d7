/**
 * parseFlags: node:util parseArgs with pflag's boolean grammar, and every problem a UsageError of
 * one line naming the flag. The agent's and exec's parsers go through it as the controller's do.
 */
import { describe, expect, it } from 'vitest';
import { parseAgentConfig } from '../../../src/config/agent.ts';
import { parseFlags } from '../../../src/config/flags.ts';
import { UsageError } from '../../../src/config/usage-error.ts';

const OPTIONS = {
  name: { type: 'string' },
  tag: { type: 'string', multiple: true },
  on: { type: 'string', default: 'false' },
} as const;
const parse = (argv: string[]): unknown => parseFlags(argv, OPTIONS, ['on']);

/** usageError returns what `f` threw, failing unless it was a UsageError. */
function usageError(f: () => unknown): UsageError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err as UsageError;
  }
  throw new Error('expected a UsageError, got none');
}

describe('parseFlags', () => {
  it.each([
    { argv: ['--name', 'a', '--tag', 'x', '--tag=y'], want: { name: 'a', tag: ['x', 'y'], on: 'false' } },
    { argv: ['--name=--dashed'], want: { name: '--dashed', on: 'false' } },
    { argv: ['--name='], want: { name: '', on: 'false' } },
    { argv: ['--on'], want: { on: 'true' } },
    { argv: ['--on=False'], want: { on: 'false' } },
    { argv: ['--on=T'], want: { on: 'true' } },
    { argv: ['--on', 'true', '--name', 'n'], want: { on: 'true', name: 'n' } },
    { argv: ['--on', '--name', 'n'], want: { on: 'true', name: 'n' } },
    { argv: ['--'], want: { on: 'false' } },
  ])('reads $argv', ({ argv, want }) => {
    expect({ ...(parse(argv) as object) }).toEqual(want);
  });

  it.each([
    { name: 'an unknown flag', argv: ['--bogus'], flag: '--bogus', message: '--bogus: unknown flag (see --help)' },
    {
      name: 'an unknown flag with a value',
      argv: ['--bogus=1'],
      flag: '--bogus',
      message: '--bogus: unknown flag (see --help)',
    },
    { name: 'a short flag', argv: ['-n', 'a'], flag: '-n', message: '-n: unknown flag (see --help)' },
    {
      name: 'a missing value at the end',
      argv: ['--name'],
      flag: '--name',
      message: '--name: missing value (use --name=VALUE)',
    },
    {
      name: 'a value that looks like a flag (ambiguous)',
      argv: ['--name', '--on'],
      flag: '--name',
      message:
        '--name: ambiguous value "--on", which looks like a flag; write --name=VALUE (the value is missing, or starts with a dash)',
    },
    {
      name: 'a boolean given a word that is not one',
      argv: ['--on', 'yes'],
      flag: '--on',
      message: '--on: must be true or false, got "yes"',
    },
    {
      name: 'a boolean given a bad value with =',
      argv: ['--on=2'],
      flag: '--on',
      message: '--on: must be true or false, got "2"',
    },
    {
      name: 'a positional argument',
      argv: ['--name', 'a', 'extra'],
      flag: '"extra"',
      message: '"extra": unexpected argument; this command takes flags only',
    },
    {
      name: 'a positional after --',
      argv: ['--', 'extra'],
      flag: '"extra"',
      message: '"extra": unexpected argument; this command takes flags only',
    },
  ])('refuses $name with one line naming the flag', ({ argv, flag, message }) => {
    const err = usageError(() => parse(argv));
    expect(err).toMatchObject({ flag, message, exitCode: 2 });
    expect(err.message).not.toContain('\n');
  });
});

describe('parseAgentConfig usage errors', () => {
  const pod = { POD_NAME: 'web-0', POD_NAMESPACE: 'ns', POD_UID: 'u' };
  it.each([
    {
      argv: ['--lock', 'db', '--log-level', 'trace'],
      env: pod,
      message: '--log-level: must be debug, info, warn or error (or silent), got "trace"',
    },
    { argv: ['--lock'], env: pod, message: '--lock: missing value (use --lock=VALUE)' },
    { argv: [], env: pod, message: '--lock: at least one lock name is required' },
    { argv: ['--lock', 'Not_A_Name'], env: pod, message: '--lock: "Not_A_Name" is not a valid lock name' },
    {
      argv: ['--lock', 'db', '--listen', '0.0.0.0:7370'],
      env: pod,
      message: '--listen: "0.0.0.0:7370" is not a loopback address',
    },
    { argv: ['--lock', 'db'], env: { POD_NAME: 'web-0', POD_NAMESPACE: 'ns' }, message: 'POD_UID: not set' },
    { argv: ['--lock', 'db', '--sidecar', 'init'], env: pod, message: '--sidecar: "init" is neither native nor plain' },
    { argv: ['--lock', 'db', '--app-stop-timeout', 'soon'], env: pod, message: '--app-stop-timeout' },
  ])('refuses $argv ($message)', ({ argv, env, message }) => {
    expect(usageError(() => parseAgentConfig(argv, env)).message).toContain(message);
  });

  it.each(['debug', 'info', 'warn', 'error'])('accepts --log-level %s', (level) => {
    expect(parseAgentConfig(['--lock', 'db', '--log-level', level], pod).logLevel).toBe(level);
  });

  it('defaults to the native-sidecar form and a 25 s wait for the application', () => {
    const c = parseAgentConfig(['--lock', 'db'], pod);
    expect([c.sidecar, c.appStopTimeoutMs]).toEqual(['native', 25_000]);
  });

  it('listens on 7370-7372 by default, away from the ports applications use, and knows which listeners were defaulted', () => {
    const c = parseAgentConfig(['--lock', 'db'], pod);
    expect([c.listen, c.healthProbeBindAddress, c.metricsBindAddress]).toEqual([
      '127.0.0.1:7370',
      '0.0.0.0:7371',
      '0.0.0.0:7372',
    ]);
    expect(c.defaultedListeners).toEqual(['--listen', '--health-probe-bind-address', '--metrics-bind-address']);
    const given = parseAgentConfig(['--lock', 'db', '--listen=127.0.0.1:7370', '--metrics-bind-address=0'], pod);
    expect(given.defaultedListeners).toEqual(['--health-probe-bind-address']);
    expect(given.metricsBindAddress).toBe('0');
  });

  it('takes --sidecar plain and --app-stop-timeout', () => {
    const c = parseAgentConfig(['--lock', 'db', '--sidecar=plain', '--app-stop-timeout=10s'], pod);
    expect([c.sidecar, c.appStopTimeoutMs]).toEqual(['plain', 10_000]);
  });
});
