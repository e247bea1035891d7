import { afterEach, describe, expect, it } from 'vitest';
import { LONG, tierSize } from '../../support/tier.ts';

describe('the test tiers', () => {
  const KNOB = 'FENCEPOST_TIER_UNIT_KNOB';
  afterEach(() => {
    delete process.env[KNOB];
  });

  it('sizes a test by its tier when its knob is unset', () => {
    expect(tierSize(KNOB, 4, 12)).toBe(LONG ? 12 : 4);
  });

  it("takes the knob's value over either size", () => {
    process.env[KNOB] = '7';
    expect(tierSize(KNOB, 4, 12)).toBe(7);
  });

  it.each(['abc', '0', '-3', '2.5'])('refuses %j, naming the knob and the value', (raw) => {
    process.env[KNOB] = raw;
    expect(() => tierSize(KNOB, 4, 12)).toThrow(`${KNOB}=${JSON.stringify(raw)}: expected a positive integer`);
  });
});
