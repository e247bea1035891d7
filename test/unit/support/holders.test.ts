import { describe, expect, it } from 'vitest';
import { provenOverlaps } from '../../e2e/holders.ts';

// The e2e watch's "never two holders" verdict: an apparent overlap inside one poll (answers that
// arrive at different moments) must pass, and a real one must be caught.
describe('provenOverlaps', () => {
  const w = (pod: string, lastAskedMs: number, firstAnsweredMs: number) => ({ pod, lastAskedMs, firstAnsweredMs });

  it('passes a handover whose old holder was last asked before the new one first answered held', () => {
    // One poll: the old holder asked at 100 (held, just before its release), the new holder's answer
    // at 180 (held, just after its grant): both held in one round, but not proven at once.
    const windows = new Map([
      [5n, w('a', 100, 102)],
      [6n, w('b', 101, 180)],
    ]);
    expect(provenOverlaps(windows)).toEqual([]);
  });

  it('catches an old holder still saying held when asked after its successor said held', () => {
    const windows = new Map([
      [5n, w('a', 300, 102)],
      [6n, w('b', 150, 180)],
    ]);
    expect(provenOverlaps(windows)).toEqual([
      'a (token 5) said held when asked 120 ms after b (token 6) had said held',
    ]);
  });

  it('compares every pair, whatever order the terms were seen in', () => {
    const windows = new Map([
      [9n, w('c', 500, 400)],
      [7n, w('a', 450, 10)],
      [8n, w('b', 20, 30)],
    ]);
    expect(provenOverlaps(windows)).toHaveLength(2);
  });
});
