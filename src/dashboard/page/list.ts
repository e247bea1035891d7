/**
 * The page's list of every lock, windowed: the locks live in plain objects (the views the server
 * sent, a sorted key list, the keys that pass the filters), and only the rows on screen plus
 * {@link OVERSCAN} on each side are in the DOM, between two spacer rows that stand for the rest.
 * A 1,000-row table made the renderer's heap grow by garbage from DOM text and style churn (the
 * tab peaked at 213 MB in bench/dashboard.ts); a screenful bounds that whatever the lock count.
 *
 * An SSE change writes only the rows rendered; a change that moves a lock in or out of the
 * filtered list (a new or deleted lock, a holder or state a filter looks at) re-renders the
 * window. Rows are keyed by lock: one that stays in the window keeps its element and is never
 * moved, so keyboard focus and a screen reader's position survive updates and scrolling. Tab
 * reaches rows beyond the window because the overscan rows are focusable and focusing one scrolls
 * it into view, which moves the window on (synchronously, on `focusin`). Screen readers get the
 * whole list's size and each row's place from `aria-rowcount` and `aria-rowindex`.
 *
 * Assumes every row has one height (the stylesheet keeps cells to one line and cuts long text
 * with an ellipsis); the height is measured from the rows rendered, not assumed.
 */
import type { Delta, LockView, Snapshot, TimelineEntry } from '../wire.ts';
import type { El, Hist, Loc, MessageEv, SourceConstructor, Win } from './dom.ts';
import { byId, connection, countdown, dropCountdown, h, heard, setText } from './ui.ts';
import { clockText, matches, permitsText, stateText, type Filter } from './view.ts';
import { windowSpan } from './window.ts';

declare const location: Loc;
declare const history: Hist;
declare const EventSource: SourceConstructor;
declare const window: Win;

/** OVERSCAN: rows rendered above and below the screen: room for Tab, Shift+Tab and a short scroll. */
const OVERSCAN = 10;
/** COLUMNS: the table's columns; the spacer cells span them all. */
const COLUMNS = 9;
/** FALLBACK_ROW_PX: a row's height until one is measured (about the stylesheet's desktop row). */
const FALLBACK_ROW_PX = 34;

/** Row is a rendered row: its elements and what was last written to them. */
interface Row {
  readonly tr: El;
  readonly cells: {
    readonly namespace: El;
    readonly mode: El;
    readonly holder: El;
    readonly token: El;
    readonly expires: El;
    readonly permits: El;
    readonly state: El;
    readonly recent: El;
  };
  /** state: the row's data-state attribute as last written. */
  state: string;
  /** index: the row's place in the filtered list, as last written to aria-rowindex. */
  index: number;
}

function lockHref(key: string): string {
  return `/?lock=${encodeURIComponent(key)}`;
}

function recentText(entries: readonly TimelineEntry[]): string {
  return entries
    .slice()
    .reverse()
    .map((e) => `${clockText(e.time)} ${e.kind}`)
    .join(', ');
}

function makeRow(v: LockView): Row {
  const td = (label: string, cls = ''): El => h('td', { 'data-label': label, ...(cls ? { class: cls } : {}) });
  const cells = {
    namespace: td('Namespace'),
    mode: td('Mode'),
    holder: td('Holder', 'holder'),
    token: td('Token', 'num token'),
    expires: td('Expires in', 'num expires'),
    permits: td('Permits / queue'),
    state: td('State'),
    recent: td('Last transitions', 'recent'),
  };
  const name = h(
    'th',
    { scope: 'row', 'data-label': 'Lock' },
    h('a', { href: lockHref(v.key), class: 'lock-link', title: v.name }, v.name),
  );
  const tr = h(
    'tr',
    { 'data-key': v.key },
    name,
    cells.namespace,
    cells.mode,
    cells.holder,
    cells.token,
    cells.expires,
    cells.permits,
    cells.state,
    cells.recent,
  );
  return { tr, cells, state: '', index: -1 };
}

/** setLongText is setText for a cell whose text may be cut with an ellipsis: its title shows it whole. */
function setLongText(el: El, text: string): void {
  if (el.textContent === text) return;
  el.textContent = text;
  el.setAttribute('title', text);
}

/** fill writes a lock into its row; only what changed is written (every write invalidates style). */
function fill(row: Row, v: LockView): void {
  const c = row.cells;
  setText(c.namespace, v.namespace);
  setText(c.mode, v.store === 'Lease' ? v.mode : `${v.mode} (${v.store})`);
  setLongText(c.holder, v.mode === 'Semaphore' ? v.holders.map((p) => p.holder).join(', ') || '—' : (v.holder ?? '—'));
  setText(c.token, v.token ?? '—');
  countdown(c.expires, v.expireTime);
  setText(c.permits, permitsText(v));
  setLongText(c.state, stateText(v));
  const cls = `state ${v.state.toLowerCase()}${v.degraded ? ' degraded' : ''}`;
  if (c.state.className !== cls) c.state.className = cls;
  setLongText(c.recent, recentText(v.recent));
  if (row.state !== v.state) {
    row.state = v.state;
    row.tr.setAttribute('data-state', v.state);
  }
}

function spacer(): { tr: El; td: El } {
  const td = h('td', { colspan: String(COLUMNS) });
  return { tr: h('tr', { class: 'spacer', 'aria-hidden': 'true' }, td), td };
}

/** listPage shows every lock, follows `GET /events`, and keeps the filters in the URL. */
export function listPage(): void {
  byId('list-view').hidden = false;
  const table = byId('locks');
  const tbody = byId('lock-rows');
  const nsSelect = byId('f-namespace');
  const stateSelect = byId('f-state');
  const textInput = byId('f-text');
  const count = byId('count');

  /** views: every lock, as the server last sent it. */
  const views = new Map<string, LockView>();
  /** order: every lock's key, sorted. */
  let order: string[] = [];
  /** shown: the keys that pass the filters, sorted: the list the window slides over. */
  let shown: string[] = [];
  /** rendered: the rows in the DOM, by key; renderedKeys: their keys in DOM order. */
  const rendered = new Map<string, Row>();
  let renderedKeys: string[] = [];
  let rowHeight = FALLBACK_ROW_PX;
  let namespaces = '';

  const top = spacer();
  const bottom = spacer();
  tbody.replaceChildren(top.tr, bottom.tr);

  const params = new URLSearchParams(location.search);
  const filter = (): Filter => ({ namespace: nsSelect.value, state: stateSelect.value, text: textInput.value });
  stateSelect.value = params.get('state') ?? '';
  textInput.value = params.get('q') ?? '';
  let wantedNamespace = params.get('namespace') ?? '';

  const dropRow = (key: string): void => {
    const row = rendered.get(key);
    if (row === undefined) return;
    row.tr.remove();
    dropCountdown(row.cells.expires);
    rendered.delete(key);
  };

  /** render puts the window's rows in the DOM, between spacers as tall as the rows they stand for. */
  const render = (measured = false): void => {
    const span = windowSpan({
      count: shown.length,
      rowHeight,
      scrolled: -tbody.getBoundingClientRect().top,
      viewport: window.innerHeight,
      overscan: OVERSCAN,
    });
    const keys = shown.slice(span.start, span.end);
    const wanted = new Set(keys);
    for (const key of renderedKeys) if (!wanted.has(key)) dropRow(key);
    // What stays is in the same order as `keys` (both sorted), so new rows are only inserted,
    // never moved: moving an element would take the focus out of it.
    const kept = renderedKeys.filter((k) => wanted.has(k));
    let j = 0;
    keys.forEach((key, i) => {
      let row = rendered.get(key);
      if (row !== undefined && kept[j] === key) j++;
      else {
        const v = views.get(key);
        if (v === undefined) return;
        row = makeRow(v);
        fill(row, v);
        rendered.set(key, row);
        const next = kept[j];
        tbody.insertBefore(row.tr, (next !== undefined ? rendered.get(next)?.tr : undefined) ?? bottom.tr);
      }
      const index = span.start + i;
      if (row.index !== index) {
        row.index = index;
        row.tr.setAttribute('aria-rowindex', String(index + 2)); // the header row is 1
      }
    });
    renderedKeys = keys;
    top.td.style.height = `${span.before}px`;
    bottom.td.style.height = `${span.after}px`;
    // The first render estimates the row height; measure it and render again if it was off.
    const first = rendered.get(keys[0] ?? '');
    const last = rendered.get(keys[keys.length - 1] ?? '');
    if (first === undefined || last === undefined || measured) return;
    // From one row's top to the last's: the pitch, margins between cards (phone width) included.
    const firstBox = first.tr.getBoundingClientRect();
    const height =
      keys.length > 1 ? (last.tr.getBoundingClientRect().top - firstBox.top) / (keys.length - 1) : firstBox.height;
    if (height > 0 && Math.abs(height - rowHeight) > 0.5) {
      rowHeight = height;
      render(true);
    }
  };

  let scheduled = false;
  /** schedule renders at the next frame, once however many scroll events come before it. */
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    window.requestAnimationFrame(() => {
      scheduled = false;
      render();
    });
  };
  window.addEventListener('scroll', schedule, { passive: true });
  window.addEventListener('resize', schedule, { passive: true });
  // A row focused by Tab has just been scrolled into view: move the window now, before the next key.
  tbody.addEventListener('focusin', () => {
    render();
  });

  /** refilter recomputes the filtered list, its count and size, and the window. */
  const refilter = (): void => {
    const f = filter();
    shown = order.filter((k) => {
      const v = views.get(k);
      return v !== undefined && matches(v, f);
    });
    setText(count, `${shown.length} of ${views.size} locks shown`);
    table.setAttribute('aria-rowcount', String(shown.length + 1));
    render();
  };

  const remember = (): void => {
    const q = new URLSearchParams();
    const f = filter();
    if (f.namespace !== '') q.set('namespace', f.namespace);
    if (f.state !== '') q.set('state', f.state);
    if (f.text !== '') q.set('q', f.text);
    const s = q.toString();
    history.replaceState(null, '', s === '' ? '/' : `/?${s}`);
  };
  for (const el of [nsSelect, stateSelect]) {
    el.addEventListener('change', () => {
      wantedNamespace = nsSelect.value;
      refilter();
      remember();
    });
  }
  textInput.addEventListener('input', () => {
    refilter();
    remember();
  });
  byId('filters').addEventListener('submit', (e) => {
    e.preventDefault();
  });

  const refreshNamespaces = (): void => {
    const all = [...new Set([...views.values()].map((v) => v.namespace))].sort();
    const joined = all.join('\n');
    if (joined === namespaces) return;
    namespaces = joined;
    nsSelect.replaceChildren(
      h('option', { value: '' }, 'All namespaces'),
      ...all.map((ns) => h('option', { value: ns }, ns)),
    );
    nsSelect.value = all.includes(wantedNamespace) ? wantedNamespace : '';
  };

  /** upsert stores a lock and updates its row if rendered; true when the filtered list may have changed. */
  const upsert = (v: LockView, f: Filter): boolean => {
    const old = views.get(v.key);
    views.set(v.key, v);
    const row = rendered.get(v.key);
    if (row !== undefined) fill(row, v);
    if (old !== undefined) return matches(old, f) !== matches(v, f);
    // Keep `order` sorted: insert before the first larger key.
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((order[mid] ?? '') < v.key) lo = mid + 1;
      else hi = mid;
    }
    order.splice(lo, 0, v.key);
    return true;
  };

  const source = new EventSource('/events');
  source.addEventListener('snapshot', (m: MessageEv) => {
    const s = JSON.parse(m.data) as Snapshot;
    heard(s.now);
    views.clear();
    for (const v of s.locks) views.set(v.key, v);
    order = [...views.keys()].sort();
    // A reconnect's snapshot may carry new views for rendered rows: write them all.
    for (const [key, row] of rendered) {
      const v = views.get(key);
      if (v !== undefined) fill(row, v);
    }
    refreshNamespaces();
    refilter();
    connection(s.synced ? 'Live' : 'Live (still listing)', true);
    table.setAttribute('aria-busy', 'false');
  });
  source.addEventListener('delta', (m: MessageEv) => {
    const d = JSON.parse(m.data) as Delta;
    heard(d.now);
    const f = filter();
    let changed = false;
    for (const v of d.upsert) if (upsert(v, f)) changed = true;
    if (d.remove.length > 0) {
      const gone = new Set(d.remove.filter((k) => views.delete(k)));
      if (gone.size > 0) {
        order = order.filter((k) => !gone.has(k));
        changed = true;
      }
    }
    if (!changed) return;
    refreshNamespaces();
    refilter();
  });
  source.addEventListener('error', () => {
    connection('Disconnected, reconnecting…', false);
  });
}
