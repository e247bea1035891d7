/**
 * A small SVG line chart, enough for the benchmark plots in docs/img/ (distributions as empirical
 * CDFs, the scale curves over time): linear or log-10 x axis, linear y axis, one polyline (step
 * or straight) per series, a legend. No dependency; the output is a deterministic string.
 */

/** Series is one named line. Points need not be sorted. */
export interface Series {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
  /** step draws a staircase (for CDFs); default false. */
  readonly step?: boolean;
  readonly dashed?: boolean;
}

/** ChartOptions describes one chart. */
export interface ChartOptions {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  readonly xLog?: boolean;
  readonly yMin?: number;
  readonly yMax?: number;
  /** markers: vertical reference lines (e.g. the lease duration). */
  readonly markers?: readonly { readonly x: number; readonly label: string }[];
  readonly width?: number;
  readonly height?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (n: number): string => (Math.abs(n) >= 1000 ? `${+(n / 1000).toPrecision(3)}k` : `${+n.toPrecision(3)}`);

/** niceTicks returns about `count` round tick values covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++)
    out.push(Number((k * step).toPrecision(12)));
  return out;
}

/** lineChart renders the chart as an SVG document. */
export function lineChart(o: ChartOptions): string {
  const W = o.width ?? 720;
  const H = o.height ?? 400;
  const m = { left: 64, right: 16, top: 36, bottom: 48 + 18 * Math.ceil(o.series.length / 2) };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const xs = o.series
    .flatMap((s) => s.points.map((p) => p[0]))
    .concat((o.markers ?? []).map((k) => k.x))
    .filter((x) => Number.isFinite(x) && (!o.xLog || x > 0));
  const ys = o.series.flatMap((s) => s.points.map((p) => p[1])).filter(Number.isFinite);
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  if (o.xLog) {
    x0 = 10 ** Math.floor(Math.log10(x0));
    x1 = 10 ** Math.ceil(Math.log10(x1));
  } else if (x1 === x0) x1 = x0 + 1;
  const y0 = o.yMin ?? Math.min(0, ...ys);
  const y1 = o.yMax ?? (Math.max(...ys) * 1.05 || 1);
  const tx = (x: number): number =>
    m.left +
    (o.xLog ? (Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) : (x - x0) / (x1 - x0)) * pw;
  const ty = (y: number): number => m.top + ph - ((y - y0) / (y1 - y0)) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(o.title)}</text>`,
  ];
  const xTicks = o.xLog
    ? Array.from({ length: Math.round(Math.log10(x1 / x0)) + 1 }, (_, i) => x0 * 10 ** i)
    : niceTicks(x0, x1);
  for (const t of xTicks) {
    const x = tx(t).toFixed(1);
    out.push(
      `<line x1="${x}" y1="${m.top}" x2="${x}" y2="${m.top + ph}" stroke="#ddd"/>`,
      `<text x="${x}" y="${m.top + ph + 16}" text-anchor="middle">${fmt(t)}</text>`,
    );
  }
  for (const t of niceTicks(y0, y1)) {
    const y = ty(t).toFixed(1);
    out.push(
      `<line x1="${m.left}" y1="${y}" x2="${m.left + pw}" y2="${y}" stroke="#ddd"/>`,
      `<text x="${m.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${fmt(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`,
    `<text x="${m.left + pw / 2}" y="${m.top + ph + 34}" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text transform="translate(16 ${m.top + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  for (const k of o.markers ?? []) {
    const x = tx(k.x).toFixed(1);
    out.push(
      `<line x1="${x}" y1="${m.top}" x2="${x}" y2="${m.top + ph}" stroke="#555" stroke-dasharray="2 3"/>`,
      `<text x="${x}" y="${m.top - 4}" text-anchor="middle" font-size="11">${esc(k.label)}</text>`,
    );
  }
  o.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length] ?? '#000';
    const pts = [...s.points]
      .filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0))
      .sort((a, b) => a[0] - b[0]);
    const path: string[] = [];
    pts.forEach(([x, y], j) => {
      const prev = pts[j - 1];
      if (s.step === true && prev !== undefined) path.push(`${tx(x).toFixed(1)},${ty(prev[1]).toFixed(1)}`);
      path.push(`${tx(x).toFixed(1)},${ty(y).toFixed(1)}`);
    });
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''} points="${path.join(' ')}"/>`,
    );
    const lx = m.left + (i % 2) * (pw / 2);
    const ly = H - 14 - 18 * (Math.ceil(o.series.length / 2) - 1 - Math.floor(i / 2));
    out.push(
      `<line x1="${lx}" y1="${ly - 4}" x2="${lx + 24}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${lx + 30}" y="${ly}">${esc(s.name)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** ecdf turns samples into CDF points (x, fraction ≤ x), starting at (min, 0). */
export function ecdf(xs: readonly number[]): [number, number][] {
  const s = [...xs].filter(Number.isFinite).sort((a, b) => a - b);
  const first = s[0];
  if (first === undefined) return [];
  return [[first, 0], ...s.map((x, i): [number, number] => [x, (i + 1) / s.length])];
}
