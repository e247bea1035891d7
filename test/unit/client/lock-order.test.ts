/** The global order in which acquire() takes a set of locks (src/client/lock-order.ts). */
import { describe, expect, it } from 'vitest';
import { compareLocks, firstDuplicate, lockOrder } from '../../../src/client/lock-order.ts';

const refs = (...names: string[]) =>
  names.map((n) => ({ namespace: n.split('/')[0] ?? '', name: n.split('/')[1] ?? '' }));
const names = (rs: readonly { namespace: string; name: string }[]) => rs.map((r) => `${r.namespace}/${r.name}`);

describe('lockOrder', () => {
  it('orders by namespace, then name, whatever the order given', () => {
    const want = ['a/x', 'a/y', 'b/a'];
    expect(names(lockOrder(refs('b/a', 'a/y', 'a/x')))).toEqual(want);
    expect(names(lockOrder(refs('a/x', 'b/a', 'a/y')))).toEqual(want);
  });

  it('compares code units, not the locale: the same order in every process', () => {
    expect(names(lockOrder(refs('n/b', 'n/B', 'n/a-1', 'n/a')))).toEqual(['n/B', 'n/a', 'n/a-1', 'n/b']);
  });

  it('gives any two sets that share locks the same relative order of the shared ones', () => {
    const p = names(lockOrder(refs('n/db', 'n/cache', 'n/queue')));
    const q = names(lockOrder(refs('n/queue', 'n/db')));
    expect(p.filter((l) => q.includes(l))).toEqual(q);
  });

  it('leaves its input as it was', () => {
    const input = refs('n/b', 'n/a');
    lockOrder(input);
    expect(names(input)).toEqual(['n/b', 'n/a']);
  });

  it('compareLocks is 0 only for the same lock', () => {
    expect(compareLocks({ namespace: 'n', name: 'a' }, { namespace: 'n', name: 'a' })).toBe(0);
    expect(compareLocks({ namespace: 'm', name: 'z' }, { namespace: 'n', name: 'a' })).toBeLessThan(0);
  });
});

describe('firstDuplicate', () => {
  it('finds the first name given twice', () => {
    expect(firstDuplicate(['a', 'b', 'c'])).toBeUndefined();
    expect(firstDuplicate(['a', 'b', 'b', 'a'])).toBe('b');
  });
});
