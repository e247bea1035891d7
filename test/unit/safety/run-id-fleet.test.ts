/**
 * The run-id-fleet checker (test/safety/faults/run-id-fleet.ts): R1 (a run id completed at most
 * once) and R2 (no run of a run id in a term after the one that completed it), pure.
 */
import { describe, expect, it } from 'vitest';
import { checkRunIds, type RunReport } from '../../safety/faults/run-id-fleet.ts';

const ran = (runId: string, pod: string, token: bigint): RunReport => ({ kind: 'ran', runId, pod, token });
const completed = (runId: string, pod: string, token: bigint): RunReport => ({ kind: 'completed', runId, pod, token });

describe('checkRunIds', () => {
  it.each([
    {
      name: 'each run id run and completed once holds',
      reports: [ran('r0', 'a', 1n), completed('r0', 'a', 1n), ran('r1', 'b', 4n), completed('r1', 'b', 4n)],
      want: { violations: [], runsAgain: 0, notCompleted: 0 },
    },
    {
      name: 'a run cut short (never completed) and run again by a later term holds, counted as run again',
      reports: [
        ran('r0', 'a', 1n),
        ran('r0', 'b', 2n),
        completed('r0', 'b', 2n),
        ran('r1', 'b', 3n),
        completed('r1', 'b', 3n),
      ],
      want: { violations: [], runsAgain: 1, notCompleted: 0 },
    },
    {
      name: 'a paused run that ends after the completion of a later term holds (its token is lower)',
      reports: [
        ran('r0', 'b', 2n),
        completed('r0', 'b', 2n),
        ran('r0', 'a', 1n),
        ran('r1', 'a', 5n),
        completed('r1', 'a', 5n),
      ],
      want: { violations: [], runsAgain: 1, notCompleted: 0 },
    },
    {
      name: 'a run id nobody completed is a liveness figure, not a violation',
      reports: [ran('r0', 'a', 1n), completed('r0', 'a', 1n), ran('r1', 'a', 2n)],
      want: { violations: [], runsAgain: 0, notCompleted: 1 },
    },
    {
      name: 'a run id completed twice breaks R1',
      reports: [
        ran('r0', 'a', 1n),
        completed('r0', 'a', 1n),
        ran('r0', 'b', 2n),
        completed('r0', 'b', 2n),
        ran('r1', 'a', 3n),
        completed('r1', 'a', 3n),
      ],
      want: { violations: ['R1: run r0 was completed 2 times (a@1, b@2)'], runsAgain: 1, notCompleted: 0 },
    },
    {
      name: 'a run started in a term after the completion breaks R2, even if its completion failed',
      reports: [
        ran('r0', 'a', 1n),
        completed('r0', 'a', 1n),
        ran('r0', 'c', 3n),
        ran('r1', 'a', 4n),
        completed('r1', 'a', 4n),
      ],
      want: {
        violations: ['R2: run r0 completed by a@1 ran again in a later term (c@3)'],
        runsAgain: 1,
        notCompleted: 0,
      },
    },
  ])('$name', ({ reports, want }) => {
    expect(checkRunIds(reports, ['r0', 'r1'])).toEqual(want);
  });
});
