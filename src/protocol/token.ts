/**
 * Fencing tokens: unsigned 63-bit integers, decimal strings on the wire and BigInt in code.
 * JavaScript numbers lose precision above 2^53, so a token is never a `number`.
 */

/** MAX_TOKEN is the largest token: Redis counters are signed 64-bit integers. */
export const MAX_TOKEN = (1n << 63n) - 1n;

const DECIMAL = /^(0|[1-9][0-9]{0,18})$/;

/** TokenError says why a token string was refused. */
export class TokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenError';
  }
}

/**
 * parseToken turns a decimal string into a token. It refuses anything but a canonical decimal
 * in [0, MAX_TOKEN]: signs, leading zeros, spaces, hex, exponents, fractions — so that one token
 * has exactly one spelling and a guard cannot be fooled by "007" or "1e3".
 */
export function parseToken(text: unknown, what = 'fencing token'): bigint {
  if (typeof text !== 'string')
    throw new TokenError(`${what} must be a decimal string, got ${typeof text}${describePrimitive(text)}`);
  if (!DECIMAL.test(text))
    throw new TokenError(
      `${what} must be a canonical non-negative decimal integer, got ${JSON.stringify(text.slice(0, 40))}`,
    );
  const v = BigInt(text);
  if (v > MAX_TOKEN) throw new TokenError(`${what} ${text} exceeds the maximum ${MAX_TOKEN}`);
  return v;
}

/**
 * tokenOrUndefined is {@link parseToken} for a value that may be absent or malformed (a status
 * field, an annotation anyone could have written): the token, or undefined instead of an error.
 */
export function tokenOrUndefined(text: string | undefined): bigint | undefined {
  if (text === undefined) return undefined;
  try {
    return parseToken(text);
  } catch {
    return undefined;
  }
}

/** describePrimitive names a non-string value in an error message (numbers, bigints, booleans); objects are not printed. */
function describePrimitive(v: unknown): string {
  return typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean' ? ` ${String(v).slice(0, 40)}` : '';
}
