/**
 * The node-loss trial's counters read from a Lease history (test/safety/faults/node-loss.ts):
 * a successor granted before the cut-off holder's last renewal + lease + lock delay is early;
 * a grant before the fault, or after the holder released its term itself, is not counted.
 */
import { describe, expect, it } from 'vitest';
import { earlyGrant, wallMs } from '../../safety/faults/node-loss.ts';
import type { LeaseVersion } from '../../safety/history.ts';

const v = (
  rv: number,
  holder: string | undefined,
  token: number,
  renew: string | undefined,
  release?: string,
): LeaseVersion => ({
  at: rv,
  resourceVersion: BigInt(rv),
  holder,
  token: BigInt(token),
  renewTime: renew,
  transitions: 0,
  release,
});
const T0 = Date.parse('2026-12-04T06:00:00.000Z');

describe('node-loss counters', () => {
  it('reads MicroTime with its microseconds', () => {
    expect(wallMs('2026-12-04T06:00:00.123456Z') - T0).toBeCloseTo(123.456, 3);
    expect(wallMs('2026-12-04T06:00:00.123Z') - T0).toBe(123);
  });

  const history = (grantAt: string, release?: string): LeaseVersion[] => [
    v(1, 'a/1', 5, '2026-12-04T06:00:00.000000Z'),
    v(2, 'a/1', 5, '2026-12-04T06:00:00.300000Z'),
    ...(release !== undefined ? [v(3, undefined, 5, undefined, release)] : []),
    v(4, 'b/2', 6, grantAt),
  ];

  it('counts a grant before the last renewal + lease + lock delay, not one after', () => {
    expect(earlyGrant(history('2026-12-04T06:00:01.200000Z'), 'a/1', 5n, 1000, T0)).toEqual({
      early: true,
      gapMs: 900,
    });
    expect(earlyGrant(history('2026-12-04T06:00:01.200000Z'), 'a/1', 5n, 2000, T0)?.early).toBe(true);
    expect(earlyGrant(history('2026-12-04T06:00:02.400000Z'), 'a/1', 5n, 2000, T0)).toEqual({
      early: false,
      gapMs: 2100,
    });
  });

  it('counts a term the controller revoked (expired, terminated) like any other', () => {
    expect(earlyGrant(history('2026-12-04T06:00:01.000000Z', 'Expired'), 'a/1', 5n, 1000, T0)?.early).toBe(true);
    expect(earlyGrant(history('2026-12-04T06:00:01.000000Z', 'Terminated'), 'a/1', 5n, 1000, T0)?.early).toBe(true);
  });

  it('skips a term its holder released itself, and a grant before the fault', () => {
    expect(earlyGrant(history('2026-12-04T06:00:00.500000Z', 'Released'), 'a/1', 5n, 1000, T0)).toBeUndefined();
    expect(earlyGrant(history('2026-12-04T06:00:00.500000Z'), 'a/1', 5n, 1000, T0 + 600)).toBeUndefined();
  });
});
