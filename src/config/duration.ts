/**
 * Durations on the command line, Go style: "1500ms", "10s", "2m", "1h30m", "0". A bare number
 * is refused (its unit would be a guess).
 */
import { UsageError } from './usage-error.ts';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;

/** parseDuration returns milliseconds, or throws a UsageError naming the flag and the bad value. */
export function parseDuration(text: string, flag: string): number {
  if (text === '0') return 0;
  PART.lastIndex = 0;
  let total = 0;
  let consumed = 0;
  for (let m = PART.exec(text); m !== null; m = PART.exec(text)) {
    const [whole, num, unit] = m;
    total += Number(num) * (UNIT_MS[unit ?? ''] ?? Number.NaN);
    consumed += whole.length;
  }
  if (text === '' || consumed !== text.length || !Number.isFinite(total)) {
    throw new UsageError(flag, `invalid duration ${JSON.stringify(text)} (use e.g. 500ms, 10s, 2m, 1h30m)`);
  }
  return Math.round(total);
}
