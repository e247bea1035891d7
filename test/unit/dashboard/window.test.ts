/**
 * The list's window (page/window.ts): which rows of the filtered list are in the DOM, and how
 * tall the spacers standing for the rest are.
 */
import { describe, expect, it } from 'vitest';
import { windowSpan, type WindowInput } from '../../../src/dashboard/page/window.ts';

const base: WindowInput = { count: 1000, rowHeight: 30, scrolled: 0, viewport: 600, overscan: 10 };

describe('windowSpan', () => {
  it.each<[string, Partial<WindowInput>, [number, number]]>([
    ['renders a screenful and the overscan below it at the top of the list', {}, [0, 30]],
    ['renders fewer rows while the list starts lower on the screen', { scrolled: -300 }, [0, 20]],
    ['renders nothing of a list still below the screen but the overscan', { scrolled: -900 }, [0, 10]],
    ['renders the screen and the overscan on both sides in the middle', { scrolled: 3000 }, [90, 130]],
    ['stops at the end of the list', { scrolled: 29_500 }, [973, 1000]],
    ['renders the last screenful when the list shrank under the viewport', { count: 50, scrolled: 29_500 }, [20, 50]],
    ['renders every row of a short list', { count: 12 }, [0, 12]],
    ['renders nothing of an empty list', { count: 0 }, [0, 0]],
  ])('%s', (_, input, [start, end]) => {
    const s = windowSpan({ ...base, ...input });
    expect([s.start, s.end]).toEqual([start, end]);
  });

  it('sizes the spacers to the rows they stand for, so the scrollbar spans the whole list', () => {
    const s = windowSpan({ ...base, scrolled: 3000 });
    expect(s.before).toBe(90 * 30);
    expect(s.after).toBe((1000 - 130) * 30);
    expect(s.before + (s.end - s.start) * 30 + s.after).toBe(1000 * 30);
  });

  it('keeps the window a screenful whatever the number of locks', () => {
    for (const count of [100, 1000, 100_000]) {
      const s = windowSpan({ ...base, count, scrolled: (count / 2) * 30 });
      expect(s.end - s.start).toBeLessThanOrEqual(600 / 30 + 2 * 10 + 1);
    }
  });

  it('treats an unmeasured row height as one pixel rather than dividing by zero', () => {
    const s = windowSpan({ ...base, rowHeight: 0 });
    expect([s.start, s.end]).toEqual([0, 610]);
  });
});
