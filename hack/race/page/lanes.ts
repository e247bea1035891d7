/**
 * The timeline's drawing, as pure geometry: one lane per worker over the last {@link windowMs}, with the
 * terms it held (bars labelled with their token), its freezes (dashed boxes), lease expiries
 * (lines), and its stale writes (a green dot: refused; a red one: overwrote). The page turns the
 * shapes into SVG; the timeline's list says the same in words for screen readers.
 */
import type { RaceEvent } from '../events.ts';

/** WINDOW_MS: the most the drawing shows, ending now. Long enough for a 15 s freeze and what follows. */
export const WINDOW_MS = 45_000;

/** MIN_WINDOW_MS: the least it shows, so that a young page's first seconds are not stretched across it. */
export const MIN_WINDOW_MS = 20_000;

/** windowMs: the time the drawing spans at now — all of it since the first event (and 2 s more), within the bounds. */
export function windowMs(firstAt: number | undefined, now: number): number {
  const since = firstAt === undefined ? 0 : now - firstAt + 2000;
  return Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, since));
}

/** Shape is one SVG element: its tag, attributes and, for text, its content. */
export interface Shape {
  readonly tag: 'rect' | 'line' | 'circle' | 'text';
  readonly attrs: Readonly<Record<string, string>>;
  readonly text?: string;
}

/** Geometry: the drawing's size in CSS pixels. */
export interface Geometry {
  readonly width: number;
  readonly labelWidth: number;
  readonly laneHeight: number;
  readonly gap: number;
}

/** DEFAULT_GEOMETRY: 26 px lanes with an 80 px name column. */
export const DEFAULT_GEOMETRY: Omit<Geometry, 'width'> = { labelWidth: 80, laneHeight: 26, gap: 10 };

interface Interval {
  readonly pod: string;
  readonly from: number;
  readonly to: number;
  readonly token: string;
}

/** intervals extracts the held terms and the freezes from the events, open ones ending at now. */
export function intervals(events: readonly RaceEvent[], now: number): { held: Interval[]; frozen: Interval[] } {
  const held: Interval[] = [];
  const frozen: Interval[] = [];
  let term: { pod: string; from: number; token: string } | undefined;
  let freeze: { pod: string; from: number; token: string } | undefined;
  for (const e of events) {
    if (e.type === 'grant') {
      if (term !== undefined) held.push({ ...term, to: e.at });
      term = { pod: e.pod, from: e.at, token: e.token };
    } else if (e.type === 'frozen') {
      freeze = { pod: e.pod, from: e.at, token: e.token };
    } else if (e.type === 'thawed' && freeze !== undefined) {
      frozen.push({ ...freeze, to: e.at });
      freeze = undefined;
    }
  }
  if (term !== undefined) held.push({ ...term, to: now });
  if (freeze !== undefined) frozen.push({ ...freeze, to: now });
  return { held, frozen };
}

/** laneShapes draws the lanes of `pods` (in order) for the {@link windowMs} ending at now; the axis has four ticks. */
export function laneShapes(
  events: readonly RaceEvent[],
  pods: readonly string[],
  now: number,
  g: Geometry,
): { shapes: Shape[]; height: number } {
  const span = windowMs(events[0]?.at, now);
  const from = now - span;
  const plot = Math.max(1, g.width - g.labelWidth - 8);
  const x = (t: number): number => g.labelWidth + ((Math.min(Math.max(t, from), now) - from) / span) * plot;
  const laneY = (i: number): number => 4 + i * (g.laneHeight + g.gap);
  const lane = new Map(pods.map((p, i) => [p, i]));
  const cls = (pod: string): string => ((lane.get(pod) ?? 0) % 2 === 0 ? 'a' : 'b');
  const shapes: Shape[] = [];
  const mid = (i: number): number => laneY(i) + g.laneHeight / 2;
  const n = (v: number): string => v.toFixed(1);

  pods.forEach((pod, i) => {
    shapes.push({ tag: 'text', attrs: { x: '0', y: n(mid(i) + 4) }, text: pod });
    shapes.push({
      tag: 'line',
      attrs: { class: 'axis', x1: n(g.labelWidth), x2: n(g.labelWidth + plot), y1: n(mid(i)), y2: n(mid(i)) },
    });
  });
  const { held, frozen } = intervals(events, now);
  for (const h of held) {
    const i = lane.get(h.pod);
    if (i === undefined || h.to < from) continue;
    const x0 = x(h.from);
    const w = Math.max(1, x(h.to) - x0);
    shapes.push({
      tag: 'rect',
      attrs: {
        class: `held ${cls(h.pod)}`,
        x: n(x0),
        y: n(laneY(i) + 3),
        width: n(w),
        height: n(g.laneHeight - 6),
        rx: '3',
      },
    });
    if (w > 28)
      shapes.push({
        tag: 'text',
        attrs: { class: 'token', x: n(x0 + 4), y: n(mid(i) + 4), fill: '#ffffff' },
        text: `#${h.token}`,
      });
  }
  for (const f of frozen) {
    const i = lane.get(f.pod);
    if (i === undefined || f.to < from) continue;
    const x0 = x(f.from);
    const w = Math.max(2, x(f.to) - x0);
    shapes.push({
      tag: 'rect',
      attrs: { class: 'frozen', x: n(x0), y: n(laneY(i)), width: n(w), height: n(g.laneHeight) },
    });
    if (w > 50) shapes.push({ tag: 'text', attrs: { x: n(x0 + 4), y: n(mid(i) + 4) }, text: 'frozen' });
  }
  for (const e of events) {
    if (e.at < from) continue;
    if (e.type === 'expired') {
      const i = lane.get(e.pod);
      if (i === undefined) continue;
      shapes.push({
        tag: 'line',
        attrs: {
          class: 'expired',
          x1: n(x(e.at)),
          x2: n(x(e.at)),
          y1: n(laneY(i) - 2),
          y2: n(laneY(i) + g.laneHeight + 2),
        },
      });
    } else if (e.type === 'refused' || e.type === 'overwrote') {
      const i = lane.get(e.pod);
      if (i === undefined) continue;
      shapes.push({ tag: 'circle', attrs: { class: e.type, cx: n(x(e.at)), cy: n(mid(i)), r: '7' } });
    }
  }
  const axisY = laneY(pods.length) + 4;
  for (let k = 0; k <= 4; k++) {
    const ago = (span * (4 - k)) / 4;
    shapes.push({
      tag: 'text',
      attrs: { class: 'tick', x: n(Math.min(x(now - ago), g.labelWidth + plot - 24)), y: n(axisY + 8) },
      text: k === 4 ? 'now' : `−${Math.round(ago / 1000)} s`,
    });
  }
  return { shapes, height: axisY + 12 };
}
