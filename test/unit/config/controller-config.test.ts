import { describe, expect, it } from 'vitest';
import { parseControllerConfig } from '../../../src/config/controller.ts';
import { parseDuration } from '../../../src/config/duration.ts';
import { UsageError } from '../../../src/config/usage-error.ts';

describe('parseControllerConfig', () => {
  it('defaults to all namespaces, 4 workers, leader election on with client-go timings', () => {
    const c = parseControllerConfig([], {});
    expect(c).toMatchObject({
      namespaces: [],
      workers: 4,
      leaderElect: true,
      leaderElectionId: 'fencepost-controller',
      leaderElectionNamespace: 'default',
      leaderElectionLeaseDurationMs: 15_000,
      leaderElectionRenewDeadlineMs: 10_000,
      leaderElectionRetryPeriodMs: 2_000,
      metricsBindAddress: '0.0.0.0:8443',
      metricsSecure: true,
      metricsCertDir: undefined,
      healthProbeBindAddress: '0.0.0.0:8081',
      cacheSyncTimeoutMs: 120_000,
      logLevel: 'info',
      redisUrl: undefined,
      shards: 1,
    });
  });

  it('shares the locks among replicas with --shards above 1, leader election on and a DNS-name identity', () => {
    expect(parseControllerConfig(['--shards', '12', '--identity', 'fencepost-controller-7d9f-x2'], {})).toMatchObject({
      shards: 12,
      leaderElect: true,
      identity: 'fencepost-controller-7d9f-x2',
    });
  });

  it('serves /metrics over HTTPS with authentication and authorization unless --metrics-secure=false', () => {
    expect(parseControllerConfig(['--metrics-cert-dir', '/certs'], {})).toMatchObject({
      metricsSecure: true,
      metricsCertDir: '/certs',
    });
    expect(parseControllerConfig(['--metrics-secure=false'], {}).metricsSecure).toBe(false);
    expect(parseControllerConfig(['--metrics-secure', 'false'], {}).metricsSecure).toBe(false);
    expect(() => parseControllerConfig(['--metrics-secure=maybe'], {})).toThrow(
      '--metrics-secure: must be true or false, got "maybe"',
    );
    expect(() => parseControllerConfig(['--metrics-secure=false', '--metrics-cert-dir=/certs'], {})).toThrow(
      '--metrics-cert-dir: "/certs" has no use with --metrics-secure=false',
    );
    expect(() => parseControllerConfig(['--metrics-cert-dir='], {})).toThrow('--metrics-cert-dir: must name a folder');
  });

  it.each([
    'fencepost.io/candidate=true',
    'app in (web, api),tier!=batch',
    '!legacy,example.com/role==worker',
    'app',
    'app=',
  ])('takes --pod-label-selector %s', (sel) => {
    expect(parseControllerConfig(['--pod-label-selector', sel], {}).podLabelSelector).toBe(sel);
  });

  it.each(['', 'app=(x)', 'app in web', '=x', 'a b'])('refuses --pod-label-selector %j, naming the flag', (sel) => {
    expect(() => parseControllerConfig(['--pod-label-selector', sel], {})).toThrow(
      `--pod-label-selector: not a label selector: ${JSON.stringify(sel)}`,
    );
  });

  it('watches every pod without --pod-label-selector', () => {
    expect(parseControllerConfig([], {}).podLabelSelector).toBeUndefined();
  });

  it('takes --namespace more than once, without duplicates', () => {
    expect(parseControllerConfig(['--namespace', 'a', '--namespace', 'b', '--namespace', 'a'], {}).namespaces).toEqual([
      'a',
      'b',
    ]);
  });

  it('reads FENCEPOST_REDIS_URL, POD_NAMESPACE and POD_NAME when the flags are absent', () => {
    const c = parseControllerConfig([], {
      FENCEPOST_REDIS_URL: 'redis://r:6379',
      POD_NAMESPACE: 'fencepost-system',
      POD_NAME: 'ctrl-0',
    });
    expect(c).toMatchObject({
      redisUrl: 'redis://r:6379',
      leaderElectionNamespace: 'fencepost-system',
      identity: 'ctrl-0',
    });
  });

  it.each([
    {
      name: 'a non-numeric worker count',
      argv: ['--workers', 'x'],
      message: '--workers: must be a positive integer, got "x"',
    },
    { name: 'zero workers', argv: ['--workers', '0'], message: '--workers: must be a positive integer, got "0"' },
    {
      name: 'a bare number as a duration',
      argv: ['--leader-election-lease-duration', '15'],
      message: '--leader-election-lease-duration: invalid duration "15"',
    },
    {
      name: 'a non-boolean --leader-elect',
      argv: ['--leader-elect', 'yes'],
      message: '--leader-elect: must be true or false, got "yes"',
    },
    {
      name: 'a non-boolean --leader-elect=',
      argv: ['--leader-elect=no'],
      message: '--leader-elect: must be true or false, got "no"',
    },
    {
      name: 'an unknown log level',
      argv: ['--log-level', 'trace'],
      message: '--log-level: must be debug, info, warn or error (or silent), got "trace"',
    },
    {
      name: 'a Redis URL without the scheme',
      argv: ['--redis-url', 'localhost:6379'],
      message: '--redis-url: each URL must start with redis:// or rediss://, got "localhost:6379" in "localhost:6379"',
    },
    {
      name: 'a shard list with one URL without the scheme',
      argv: ['--redis-url', 'redis://a:6379,b:6379'],
      message: '--redis-url: each URL must start with redis:// or rediss://, got "b:6379" in "redis://a:6379,b:6379"',
    },
    {
      name: 'a shard list with an empty entry',
      argv: ['--redis-url', 'redis://a:6379,'],
      message: '--redis-url: each URL must start with redis:// or rediss://, got "" in "redis://a:6379,"',
    },
    { name: 'zero shards', argv: ['--shards', '0'], message: '--shards: must be a positive integer, got "0"' },
    { name: 'too many shards', argv: ['--shards', '1025'], message: '--shards: must be at most 1024, got 1025' },
    {
      name: 'shards without leader election',
      argv: ['--shards', '4', '--leader-elect=false'],
      message: '--shards: 4 needs leader election (each shard is held through a Lease)',
    },
    {
      name: 'shards with an identity that cannot name a Lease',
      argv: ['--shards', '4', '--identity', 'Ctrl_0'],
      message: '--identity: must be a lower-case DNS name with --shards above 1',
    },
    { name: 'an unknown flag', argv: ['--bogus'], message: '--bogus: unknown flag' },
    { name: 'a flag without its value', argv: ['--workers'], message: '--workers: missing value' },
    {
      name: 'a flag whose value looks like a flag',
      argv: ['--namespace', '--workers', '3'],
      message: '--namespace: ambiguous value "--workers"',
    },
  ])('refuses $name with a UsageError naming the flag and the value', ({ argv, message }) => {
    expect(() => parseControllerConfig(argv, {})).toThrow(message);
    expect(() => parseControllerConfig(argv, {})).toThrow(UsageError);
  });

  it.each([
    { argv: [], leaderElect: true },
    { argv: ['--leader-elect'], leaderElect: true },
    { argv: ['--leader-elect=true'], leaderElect: true },
    { argv: ['--leader-elect=false'], leaderElect: false },
    { argv: ['--leader-elect=0'], leaderElect: false },
    { argv: ['--leader-elect', 'false'], leaderElect: false },
    { argv: ['--leader-elect', '--workers', '2'], leaderElect: true },
    { argv: ['--workers', '2', '--leader-elect'], leaderElect: true },
  ])('reads $argv as leaderElect $leaderElect (pflag booleans)', ({ argv, leaderElect }) => {
    expect(parseControllerConfig(argv, {}).leaderElect).toBe(leaderElect);
  });

  it.each(['debug', 'info', 'warn', 'error', 'silent'])('accepts --log-level %s', (level) => {
    expect(parseControllerConfig(['--log-level', level], {}).logLevel).toBe(level);
  });
});

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['10s', 10_000],
    ['2m', 120_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1500],
    ['0', 0],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text, '--d')).toBe(ms);
  });
  it.each(['', '15', 's', '10 s', '-1s', '1d', '1s2'])('refuses %j', (text) => {
    expect(() => parseDuration(text, '--d')).toThrow(`--d: invalid duration ${JSON.stringify(text)}`);
    expect(() => parseDuration(text, '--d')).toThrow(UsageError);
  });
});
