/**
 * fast-check arbitraries for fencing tokens (forged or malformed ones, docs/safety.md): canonical
 * tokens with the values where precision and string comparison go wrong, and every kind of
 * malformed spelling a guard must refuse before anything is sent.
 */
import fc from 'fast-check';
import { MAX_TOKEN } from '../../src/protocol/token.ts';

/** TWO_53 is 2^53: from here on, float64 cannot tell neighbouring integers apart. */
export const TWO_53 = 2n ** 53n;

/**
 * EDGE_TOKENS: valid tokens at the edges: 0, 1, 2^53 ± 1 ("9007199254740993" and
 * 9007199254740992 are equal as float64), 10^k − 1 / 10^k (string length changes), MAX_TOKEN.
 */
export const EDGE_TOKENS: readonly bigint[] = [
  0n,
  1n,
  2n,
  9n,
  10n,
  99n,
  100n,
  TWO_53 - 1n,
  TWO_53,
  TWO_53 + 1n,
  TWO_53 + 2n,
  10n ** 18n - 1n,
  10n ** 18n,
  MAX_TOKEN - 1n,
  MAX_TOKEN,
];

/** validToken: any canonical token, biased towards the edges and towards small values. */
export const validToken: fc.Arbitrary<bigint> = fc.oneof(
  { arbitrary: fc.constantFrom(...EDGE_TOKENS), weight: 3 },
  { arbitrary: fc.bigInt({ min: 0n, max: 1000n }), weight: 2 },
  { arbitrary: fc.bigInt({ min: TWO_53 - 50n, max: TWO_53 + 50n }), weight: 2 },
  { arbitrary: fc.bigInt({ min: 0n, max: MAX_TOKEN }), weight: 2 },
);

const digits = (min: number, max: number): fc.Arbitrary<string> =>
  fc.string({
    unit: fc.constantFrom('0', '1', '2', '3', '4', '5', '6', '7', '8', '9'),
    minLength: min,
    maxLength: max,
  });

/** MalformedCategory names each kind of malformed token, for the report and for shrinking. */
export type MalformedCategory =
  | 'negative'
  | 'above-max'
  | 'leading-zeros'
  | 'whitespace'
  | 'sign'
  | 'float'
  | 'exponent'
  | 'hex'
  | 'separator'
  | 'unicode-digits'
  | 'word'
  | 'empty'
  | 'non-string';

/** Malformed is one malformed token and its category; `value` is what the caller passes in. */
export interface Malformed {
  readonly category: MalformedCategory;
  readonly value: string | bigint | number | boolean | null | undefined;
}

const m =
  (category: MalformedCategory) =>
  (value: Malformed['value']): Malformed => ({ category, value });
const FULLWIDTH = '０１２３４５６７８９';
const ARABIC_INDIC = '٠١٢٣٤٥٦٧٨٩';

/** malformedToken: every spelling parseToken must refuse (strings, bigints out of range, non-strings). */
export const malformedToken: fc.Arbitrary<Malformed> = fc.oneof(
  fc
    .bigInt({ min: -(2n ** 70n), max: -1n })
    .chain((v) => fc.constantFrom(m('negative')(v), m('negative')(v.toString()))),
  fc
    .bigInt({ min: MAX_TOKEN + 1n, max: 2n ** 80n })
    .chain((v) => fc.constantFrom(m('above-max')(v), m('above-max')(v.toString()))),
  fc
    .constantFrom('9223372036854775808', '18446744073709551615', '18446744073709551616', '99999999999999999999')
    .map(m('above-max')),
  fc
    .tuple(fc.integer({ min: 1, max: 3 }), validToken)
    .map(([n, t]) => m('leading-zeros')('0'.repeat(n) + t.toString())),
  fc
    .tuple(
      fc.constantFrom('', ' ', '\t', '\n', '\u00a0', '\u2003', '\r\n'),
      validToken,
      fc.constantFrom('', ' ', '\t', '\n', '\u00a0'),
    )
    .filter(([a, , b]) => a !== '' || b !== '')
    .map(([a, t, b]) => m('whitespace')(`${a}${t}${b}`)),
  fc.tuple(fc.constantFrom('+', '-', '−'), validToken).map(([s, t]) => m('sign')(`${s}${t}`)),
  fc.tuple(validToken, digits(0, 4)).map(([t, d]) => m('float')(`${t}.${d}`)),
  fc.tuple(digits(1, 3), digits(1, 3)).map(([a, b]) => m('float')(`${a === '' ? '0' : a}.${b}`)),
  fc.constantFrom('.5', '1.', '9007199254740993.0', '1.0').map(m('float')),
  fc
    .tuple(fc.integer({ min: 1, max: 9 }), fc.constantFrom('e', 'E', 'e+', 'e-'), fc.integer({ min: 0, max: 30 }))
    .map(([a, e, b]) => m('exponent')(`${a}${e}${b}`)),
  fc
    .tuple(fc.constantFrom('0x', '0X', '0b', '0o', ''), fc.bigInt({ min: 10n, max: MAX_TOKEN }))
    .map(([p, v]) =>
      m('hex')(p === '0b' ? `0b${v.toString(2)}` : p === '0o' ? `0o${v.toString(8)}` : `${p}${v.toString(16)}`),
    )
    .filter((x) => typeof x.value === 'string' && /[^0-9]/.test(x.value)),
  fc
    .tuple(
      validToken.filter((t) => t >= 1000n),
      fc.constantFrom('_', ',', "'", ' '),
    )
    .map(([t, sep]) => {
      const s = t.toString();
      return m('separator')(`${s.slice(0, 1)}${sep}${s.slice(1)}`);
    }),
  fc
    .tuple(validToken, fc.constantFrom(FULLWIDTH, ARABIC_INDIC))
    .map(([t, set]) => m('unicode-digits')([...t.toString()].map((c) => set[Number(c)] ?? c).join(''))),
  fc
    .constantFrom(
      'NaN',
      'Infinity',
      '-Infinity',
      '-0',
      'null',
      'undefined',
      'true',
      'token',
      '1n',
      '[1]',
      '"1"',
      '1 2',
      '12\u0000',
    )
    .map(m('word')),
  fc.constant(m('empty')('')),
  fc
    .oneof(
      fc.double(),
      fc.integer(), // Number('9007199254740993') is 2^53 already: a number cannot carry that token.
      fc.constantFrom(
        9007199254740992,
        Number('9007199254740993'),
        Number.MAX_SAFE_INTEGER + 2,
        1.5,
        -1,
        0,
        Number.NaN,
      ),
      fc.boolean(),
      fc.constantFrom(null, undefined),
    )
    .map(m('non-string')),
);

/** spelled is what a token looks like in the error message parseToken writes for it. */
export function spelled(value: Malformed['value']): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return typeof value === 'undefined' ? 'undefined' : 'object';
  return String(value).slice(0, 40);
}

/**
 * namesValue: does an error message name the refused value? parseToken quotes a malformed string
 * (JSON, first 40 characters), writes an out-of-range one as is, and names the type and value of a
 * non-string.
 */
export function namesValue(message: string, value: Malformed['value']): boolean {
  if (typeof value === 'string')
    return message.includes(JSON.stringify(value.slice(0, 40))) || message.includes(` ${value} `);
  if (typeof value === 'bigint') {
    const s = value.toString();
    return message.includes(` ${s} `) || message.includes(JSON.stringify(s.slice(0, 40)));
  }
  return message.includes(spelled(value));
}
