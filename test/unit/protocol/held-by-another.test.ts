/** heldByAnother (src/protocol/holder.ts): what `--if-held` and `ifHeld` call held. */
import { describe, expect, it } from 'vitest';
import { heldByAnother } from '../../../src/protocol/holder.ts';

const SELF = { name: 'web-0', uid: 'uid-0' };

describe('heldByAnother', () => {
  it.each([
    { holder: undefined, held: false, why: 'nobody holds it (never granted, released, revoked)' },
    { holder: SELF, held: false, why: 'this pod incarnation holds it' },
    { holder: { name: 'web-1', uid: 'uid-1' }, held: true, why: 'another pod holds it' },
    { holder: { name: 'web-0', uid: 'uid-old' }, held: true, why: 'an earlier incarnation of this pod holds it' },
    { holder: { name: 'someone', uid: '' }, held: true, why: 'a holder spelled by someone else holds it' },
  ])('$held when $why', ({ holder, held }) => {
    expect(heldByAnother(holder, SELF)).toBe(held);
  });
});
