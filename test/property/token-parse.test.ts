/**
 * Malformed tokens at the guards' shared front door, parseToken (src/protocol/token.ts): against an
 * oracle that is written differently (BigInt round trip instead of a regular expression), for
 * arbitrary strings, generated malformed tokens and every valid token. Pure; no server.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { banner, fcParams, runs } from './settings.ts';
import { malformedToken, validToken } from './tokens.ts';
import { MAX_TOKEN, parseToken, TokenError } from '../../src/protocol/token.ts';

const RUNS = 1000;

/** oracle: a canonical token is ASCII digits only, equal to its own BigInt's decimal spelling, within range. */
function oracle(s: string): bigint | undefined {
  if (s === '' || [...s].some((c) => c < '0' || c > '9')) return undefined;
  const v = BigInt(s);
  return v.toString() === s && v <= MAX_TOKEN ? v : undefined;
}

describe('parseToken against an oracle', () => {
  it('accepts exactly the canonical decimals in [0, 2^63 − 1], as the same BigInt', () => {
    console.info(banner('parseToken properties', runs(RUNS)));
    const input = fc.oneof(
      fc.string({ maxLength: 24 }),
      fc.string({ unit: fc.constantFrom('0', '1', '9', '-', '.', ' ', 'e', 'x'), maxLength: 22 }),
      validToken.map(String),
      malformedToken.map((m) => (typeof m.value === 'string' ? m.value : String(m.value))),
    );
    fc.assert(
      fc.property(input, (s) => {
        const want = oracle(s);
        let got: bigint | TokenError;
        try {
          got = parseToken(s);
        } catch (err) {
          if (!(err instanceof TokenError)) throw err;
          got = err;
        }
        if (want === undefined) expect(got).toBeInstanceOf(TokenError);
        else expect(got).toBe(want);
      }),
      fcParams(RUNS),
    );
  });
});
