/**
 * The dashboard's small pure parts: the page's countdown text and filters (page/view.ts, run here
 * under Node), the Host check against DNS rebinding, and the flags (loopback unless
 * --allow-remote).
 */
import { describe, expect, it } from 'vitest';
import { parseDashboardArgs } from '../../../src/config/dashboard.ts';
import { UsageError } from '../../../src/config/usage-error.ts';
import { hostAllowed } from '../../../src/dashboard/headers.ts';
import { countdownText, matches, parseLockKey, permitsText } from '../../../src/dashboard/page/view.ts';
import type { LockView } from '../../../src/dashboard/wire.ts';

const base: LockView = {
  key: 'ns/a',
  namespace: 'ns',
  name: 'a',
  mode: 'Election',
  store: 'Lease',
  state: 'Held',
  degraded: false,
  reason: '',
  holder: 'web-0',
  holderUid: 'u',
  token: '1',
  acquireTime: undefined,
  expireTime: undefined,
  leaseDurationSeconds: undefined,
  leaseName: 'dlock-a',
  permits: undefined,
  heldPermits: undefined,
  holders: [],
  queue: [],
  transitions: 1,
  recent: [],
};

describe('countdownText', () => {
  const at = Date.parse('2026-01-01T00:00:00.000Z');
  it.each([
    ['2026-01-01T00:00:09.200Z', '10s'],
    ['2026-01-01T00:00:00.001Z', '1s'],
    ['2026-01-01T00:04:05.000Z', '4m05s'],
    ['2026-01-01T02:03:00.000Z', '2h03m'],
    ['2025-12-31T23:59:57.000Z', 'expired 3s ago'],
  ])('counts down to %s as %s', (expire, text) => {
    expect(countdownText(expire, at)).toBe(text);
  });
  it('shows a dash without an expiry', () => {
    expect(countdownText(undefined, at)).toBe('—');
  });
});

describe('matches', () => {
  it.each([
    [{ namespace: '', state: '', text: '' }, true],
    [{ namespace: 'ns', state: 'Held', text: '' }, true],
    [{ namespace: 'other', state: '', text: '' }, false],
    [{ namespace: '', state: 'Free', text: '' }, false],
    [{ namespace: '', state: 'Degraded', text: '' }, false],
    [{ namespace: '', state: '', text: 'WEB' }, true],
    [{ namespace: '', state: '', text: 'nope' }, false],
  ])('filter %j → %s', (f, want) => {
    expect(matches(base, f)).toBe(want);
  });
  it('keeps a degraded lock under the Degraded state', () => {
    expect(matches({ ...base, degraded: true }, { namespace: '', state: 'Degraded', text: '' })).toBe(true);
  });
});

describe('permitsText and parseLockKey', () => {
  it('names permits for a Semaphore and the queue for a Mutex', () => {
    expect(permitsText({ ...base, mode: 'Semaphore', permits: 3, heldPermits: 2 })).toBe('2/3 permits');
    expect(permitsText({ ...base, mode: 'Mutex', queue: ['p-1', 'p-2'] })).toBe('2 queued');
    expect(permitsText(base)).toBe('—');
  });
  it('reads NAMESPACE/NAME and refuses anything else', () => {
    expect(parseLockKey('ns/a')).toEqual({ namespace: 'ns', name: 'a' });
    expect(parseLockKey('ns/a/b')).toBeUndefined();
    expect(parseLockKey('<script>')).toBeUndefined();
  });
});

describe('hostAllowed', () => {
  it.each([
    ['127.0.0.1:8300', true],
    ['localhost:8300', true],
    ['[::1]:8300', true],
    ['127.0.0.1:9999', false],
    ['attacker.example:8300', false],
    [undefined, false],
  ])('Host %s → %s', (host, want) => {
    expect(hostAllowed(host, 8300)).toBe(want);
  });
});

describe('parseDashboardArgs', () => {
  it('listens on 127.0.0.1:8300 by default', () => {
    expect(parseDashboardArgs([])).toMatchObject({ address: { host: '127.0.0.1', port: 8300 }, allowRemote: false });
  });
  it('refuses a non-loopback --address unless --allow-remote', () => {
    expect(() => parseDashboardArgs(['--address', '0.0.0.0:8300'])).toThrow(UsageError);
    expect(() => parseDashboardArgs(['--address', ':8300'])).toThrow(/--address: ":8300" is not a loopback address/);
    expect(parseDashboardArgs(['--address', '0.0.0.0:8300', '--allow-remote']).address.host).toBe('0.0.0.0');
  });
  it('names a bad flag', () => {
    expect(() => parseDashboardArgs(['--namespace', 'Bad_NS'])).toThrow(/^--namespace:/);
    expect(() => parseDashboardArgs(['--bogus'])).toThrow(/^--bogus: unknown flag/);
  });
});
