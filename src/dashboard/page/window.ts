/**
 * The list's window: which rows of a long list are in the DOM. Only the rows on screen and a few
 * above and below (the overscan) are rendered, so the page's DOM, style and text churn stay the
 * size of a screenful however many locks there are (so that 1,000 locks stay under 200 MB in the browser).
 * Pure, so that the unit tests run it under Node; page/list.ts measures and renders.
 */

/** Span is the rows [start, end) to render, and the space the rows outside it would take. */
export interface Span {
  readonly start: number;
  readonly end: number;
  /** before: pixels of the rows above `start` (the top spacer's height). */
  readonly before: number;
  /** after: pixels of the rows from `end` on (the bottom spacer's height). */
  readonly after: number;
}

/** WindowInput is what {@link windowSpan} needs to know about the list and the viewport. */
export interface WindowInput {
  /** count: rows in the (filtered) list. */
  readonly count: number;
  /** rowHeight: one row's height in pixels (rows have one fixed height, set by the stylesheet). */
  readonly rowHeight: number;
  /**
   * scrolled: how far the viewport's top is below the list's top, in pixels: negative while the
   * list starts further down the screen.
   */
  readonly scrolled: number;
  /** viewport: the viewport's height in pixels. */
  readonly viewport: number;
  /** overscan: rows rendered beyond each edge of the screen, so Tab and a short scroll find rows there. */
  readonly overscan: number;
}

/**
 * windowSpan: the rows on screen plus `overscan` rows on each side, clamped to the list. When the
 * viewport is past the end (the list just shrank under it), the last screenful is rendered, so the
 * page never shows an empty table while the browser corrects its scroll position.
 */
export function windowSpan(w: WindowInput): Span {
  if (w.count <= 0) return { start: 0, end: 0, before: 0, after: 0 };
  const h = w.rowHeight > 0 ? w.rowHeight : 1;
  const onScreen = Math.max(1, Math.ceil(w.viewport / h));
  const first = Math.floor(Math.max(0, w.scrolled) / h);
  const last = Math.ceil(Math.max(0, w.scrolled + w.viewport) / h);
  let start = Math.max(0, first - w.overscan);
  if (start >= w.count) start = Math.max(0, w.count - onScreen - w.overscan);
  const end = Math.min(w.count, Math.max(start + 1, last + w.overscan));
  return { start, end, before: start * h, after: (w.count - end) * h };
}
