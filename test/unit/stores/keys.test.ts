// A store lock's keys (src/stores/redis/keys.ts): the counter is the controller's own key, the
// holder key hashes to the counter's Redis Cluster slot (one script touches both), and nothing is
// under the guards' reserved prefix.
import { describe, expect, it } from 'vitest';
import { fenceCounterKey } from '../../../src/fencing/redis-fence.ts';
import { lockKeys } from '../../../src/stores/redis/keys.ts';

/** crc16 is CRC-16/XMODEM, the hash of Redis Cluster key slots (cluster spec, appendix A). */
function crc16(s: string): number {
  let crc = 0;
  for (const b of Buffer.from(s)) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** slot is a key's Cluster slot: the hash of its first non-empty {tag}, else of the whole key. */
function slot(key: string): number {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  const hashed = open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
  return crc16(hashed) % 16384;
}

describe('lockKeys', () => {
  it('the CRC-16 of the cluster spec (its test vector)', () => {
    expect(crc16('123456789')).toBe(0x31c3);
  });

  it('uses the controller counter key, so tokens continue when a lock moves between the controller and a store', () => {
    expect(lockKeys('team-a', 'billing')).toEqual({
      holder: 'fencepost:lock:{fencepost:fence:team-a/billing}',
      counter: 'fencepost:fence:team-a/billing',
      epoch: 'fencepost:epoch:{fencepost:fence:team-a/billing}',
      channel: 'fencepost:released:team-a/billing',
    });
    expect(lockKeys('team-a', 'billing').counter).toBe(fenceCounterKey('team-a', 'billing'));
  });

  it.each(['billing', 'a', 'x-1', 'z'.repeat(63)])('holder and counter of %s share a Cluster slot', (name) => {
    const k = lockKeys('default', name);
    expect(slot(k.holder)).toBe(slot(k.counter));
  });

  it('keeps out of the guards’ reserved prefix', () => {
    const k = lockKeys('default', 'billing');
    for (const key of [k.holder, k.counter]) expect(key.startsWith('fencepost:guard:')).toBe(false);
  });
});
