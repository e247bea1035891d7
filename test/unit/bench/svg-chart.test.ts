import { describe, expect, it } from 'vitest';
import { ecdf, lineChart, niceTicks } from '../../../bench/svg-chart.ts';

describe('bench SVG charts', () => {
  it('niceTicks picks round steps covering the range', () => {
    expect(niceTicks(0, 100)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(3, 3)).toEqual([3]);
  });

  it('ecdf starts at 0 on the smallest sample and reaches 1 on the largest, ignoring non-numbers', () => {
    expect(ecdf([30, 10, Number.NaN, 20])).toEqual([
      [10, 0],
      [10, 1 / 3],
      [20, 2 / 3],
      [30, 1],
    ]);
    expect(ecdf([])).toEqual([]);
  });

  it('lineChart draws one polyline and one legend entry per series, on a log axis when asked', () => {
    const svg = lineChart({
      title: 'A & B',
      xLabel: 'ms',
      yLabel: 'fraction',
      xLog: true,
      yMin: 0,
      yMax: 1,
      series: [
        { name: 'a', points: ecdf([5, 50]), step: true },
        {
          name: 'b',
          points: [
            [100, 0.5],
            [1000, 1],
          ],
          dashed: true,
        },
      ],
      markers: [{ x: 3000, label: 'lease' }],
    });
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg).toContain('A &amp; B');
    expect(svg).toContain('>lease</text>');
    // log axis: decades from 1 to 10k
    for (const t of ['>1<', '>10<', '>100<', '>1k<', '>10k<']) expect(svg).toContain(t);
  });
});
