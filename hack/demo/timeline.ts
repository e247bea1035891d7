/**
 * The demo's narration: one line per step, prefixed with the seconds since the demo started.
 * Colour only when the output is a terminal (and NO_COLOR is unset).
 */

/** Paint wraps text in ANSI styles, or returns it unchanged when colour is off. */
export interface Paint {
  readonly bold: (s: string) => string;
  readonly dim: (s: string) => string;
  readonly green: (s: string) => string;
  readonly red: (s: string) => string;
  readonly yellow: (s: string) => string;
  /** pod gives each pod name its own colour. */
  readonly pod: (name: string) => string;
}

/** Timeline writes the narration. */
export interface Timeline {
  readonly paint: Paint;
  /** elapsed is the number of seconds since the demo started. */
  elapsed(): number;
  /** step prints one timestamped line. */
  step(text: string): void;
  /** heading prints a blank line and an untimed title. */
  heading(text: string): void;
  /** plain prints text as is (the summary). */
  plain(text: string): void;
}

function paint(colour: boolean): Paint {
  const sgr =
    (open: number, close: number) =>
    (s: string): string =>
      colour ? `\x1b[${open}m${s}\x1b[${close}m` : s;
  const podColours = [sgr(36, 39), sgr(35, 39), sgr(34, 39)];
  const seen = new Map<string, (s: string) => string>();
  return {
    bold: sgr(1, 22),
    dim: sgr(2, 22),
    green: sgr(32, 39),
    red: sgr(31, 39),
    yellow: sgr(33, 39),
    pod: (name) => {
      let p = seen.get(name);
      if (p === undefined) {
        p = podColours[seen.size % podColours.length] ?? ((s: string) => s);
        seen.set(name, p);
      }
      return p(name);
    },
  };
}

/** timeline narrates to out; startedAt is the demo's start on performance.now(). */
export function timeline(out: NodeJS.WritableStream, colour: boolean, startedAt: number): Timeline {
  const p = paint(colour);
  const elapsed = (): number => (performance.now() - startedAt) / 1000;
  return {
    paint: p,
    elapsed,
    step(text) {
      out.write(`${p.dim(`${elapsed().toFixed(1).padStart(5)}s`)}  ${text}\n`);
    },
    heading(text) {
      out.write(`\n${p.bold(text)}\n`);
    },
    plain(text) {
      out.write(text.endsWith('\n') ? text : `${text}\n`);
    },
  };
}
