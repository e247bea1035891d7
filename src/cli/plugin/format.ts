/**
 * Text formatting shared by the plugin's commands, in kubectl's own conventions so that the
 * output reads like `kubectl get`: durations as kubectl's `HumanDuration` prints an AGE, and
 * tables as its printer lays them out (upper-case headers, columns three spaces apart, `<none>`
 * for an empty cell). Pure.
 */

/** NONE is what kubectl prints in an empty cell. */
export const NONE = '<none>';

/**
 * humanDuration renders a non-negative duration the way kubectl's AGE column does
 * (k8s.io/apimachinery duration.HumanDuration): `45s`, `3m20s`, `25m`, `5h30m`, `2d3h`, `40d`,
 * `3y45d`. Negative durations (a clock behind) read as `0s`, as kubectl's do.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(Math.max(0, ms) / 1000);
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8)
    return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const days = Math.floor(hours / 24) % 365;
    return days === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${days}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}

/**
 * countdown renders the time left until `deadlineMs` from `nowMs`: `in 12s`, or `12s ago` once it
 * has passed (a holder overdue by this machine's clock).
 */
export function countdown(deadlineMs: number, nowMs: number): string {
  const left = deadlineMs - nowMs;
  return left >= 0 ? `in ${humanDuration(left)}` : `${humanDuration(-left)} ago`;
}

/**
 * table lays out rows under upper-case headers, each column as wide as its widest cell and three
 * spaces from the next, trailing spaces trimmed: kubectl's printer (a tabwriter with padding 3).
 * Empty cells print as {@link NONE}. Ends with a newline; no rows print only the headers.
 */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((r) => headers.map((_, i) => cell(r[i])))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd((widths[i] ?? 0) + 3)))
        .join('')
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join('');
}

function cell(text: string | undefined): string {
  return text === undefined || text === '' ? NONE : text.replace(/\s*\n\s*/g, ' ');
}

/**
 * fields lays out `label: value` pairs under each other (kubectl describe's layout), values
 * aligned; an empty value prints as {@link NONE}.
 */
export function fields(pairs: readonly (readonly [string, string | undefined])[]): string {
  const width = Math.max(0, ...pairs.map(([k]) => k.length + 1));
  return pairs.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${cell(v)}\n`).join('');
}

/**
 * timeMs reads a time of an API object as milliseconds since the epoch, or undefined. Objects read
 * with the JSON client carry RFC 3339 strings where client-node's types say Date, so both are read.
 */
export function timeMs(time: unknown): number | undefined {
  const t = time instanceof Date ? time.getTime() : typeof time === 'string' ? Date.parse(time) : NaN;
  return Number.isFinite(t) ? t : undefined;
}

/** ageOf renders how long ago an RFC 3339 time was (`45s`), or undefined when there is no such time. */
export function ageOf(time: string | Date | undefined, nowMs: number): string | undefined {
  const t = timeMs(time);
  return t !== undefined ? humanDuration(nowMs - t) : undefined;
}
