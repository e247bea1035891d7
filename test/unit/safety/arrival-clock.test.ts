// ArrivalClock (test/safety/workers.ts): the stamps of a killed worker's last lines. A line the
// worker wrote just before its SIGKILL can be read after the kill was noted (a loaded machine);
// stamped on arrival, it reopened a belief of the dead process that nothing closed, and a Semaphore
// trial reported three believers with two permits (CI, semaphore kill/random). Stamped before the
// kill's instant, it closes with the kill.
import { describe, expect, it } from 'vitest';
import { excesses } from '../../../test/safety/semaphore-check.ts';
import type { ClientEvent } from '../../../test/safety/history.ts';
import { ArrivalClock } from '../../../test/safety/workers.ts';

const A = 'pod-a/uid-a';
const B = 'pod-b/uid-b';
const C = 'pod-c/uid-c';

describe('ArrivalClock', () => {
  it('stamps lines on arrival until the kill, and lines read after it just before its instant', () => {
    let now = 100;
    const clock = new ArrivalClock(() => now);
    expect(clock.stamp()).toBe(100);
    now = 200;
    const killedAt = clock.kill();
    expect(killedAt).toBe(200);
    now = 260;
    expect(clock.stamp()).toBeLessThan(killedAt);
    expect(clock.stamp()).toBeGreaterThan(199.99);
    now = 300;
    expect(clock.kill(), 'a second kill keeps the first instant').toBe(200);
  });

  it("a killed holder's last renew read late no longer makes a third believer of two permits", () => {
    // A holds permit 0 and is killed at 1000 with a renew still in the pipe, read at 1060; its
    // permit goes to C at 2100 (after the lease), while B holds permit 1 throughout.
    const history = (renewAt: number): ClientEvent[] => [
      { kind: 'granted', at: 0, holder: A, token: 5n },
      { kind: 'granted', at: 10, holder: B, token: 6n },
      { kind: 'killed', at: 1000, holder: A },
      { kind: 'renewed', at: renewAt, holder: A, token: 5n },
      { kind: 'granted', at: 2100, holder: C, token: 7n },
      { kind: 'released', at: 2600, holder: C, token: 7n },
      { kind: 'released', at: 2700, holder: B, token: 6n },
    ];
    // Stamped on arrival (after the kill's note): A believes again from 1060 on, never closed.
    const before = excesses(history(1060), 2, 1000);
    expect(before.map((x) => ({ ...x, holders: [...x.holders].sort() }))).toEqual([
      { fromMs: 2100, toMs: 2600, holders: [A, B, C] },
    ]);
    // Stamped as the clock stamps it now: before the kill, which closes it.
    let now = 1000;
    const clock = new ArrivalClock(() => now);
    const killedAt = clock.kill();
    now = 1060;
    const stamped = clock.stamp();
    expect(killedAt).toBe(1000);
    expect(excesses(history(stamped), 2, 1000)).toEqual([]);
  });
});
