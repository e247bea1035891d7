/**
 * configEpoch reads the failover count a Sentinel gives for a master; an answer without a usable
 * one is none (the grant then uses the largest seen before, or fails), never a zero.
 */
import { describe, expect, it } from 'vitest';
import { configEpoch } from '../../../src/stores/redis/sentinel-failovers.ts';

describe('configEpoch', () => {
  it('reads config-epoch from a SENTINEL MASTER answer', () => {
    expect(configEpoch(['name', 'm', 'ip', '127.0.0.1', 'config-epoch', '7', 'flags', 'master'])).toBe(7n);
  });
  it('is undefined for an answer without one, a malformed one, or not a list', () => {
    expect(configEpoch(['name', 'm'])).toBeUndefined();
    expect(configEpoch(['config-epoch', '-1'])).toBeUndefined();
    expect(configEpoch(['config-epoch', '1e3'])).toBeUndefined();
    expect(configEpoch(['config-epoch'])).toBeUndefined();
    expect(configEpoch('ERR No such master with that name')).toBeUndefined();
  });
});
