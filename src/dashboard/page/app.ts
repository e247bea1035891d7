/**
 * The dashboard page (a plain ES module, no framework): the list of every lock, or with
 * `?lock=NAMESPACE/NAME` one lock and its timeline. Both follow the server's Server-Sent Events
 * (`/events`): a snapshot, then only what changed. Countdowns are computed here from the absolute
 * expiry times the server sends, corrected by the offset between the server's clock and this
 * browser's (from each message's `now`), so they move without any traffic.
 *
 * Rows are updated in place (the same elements, new text), so that keyboard focus and screen
 * reader position survive a change of the lock under them.
 */
import type { Delta, DetailEvent, LockDetail, LockView, Snapshot, TimelineEntry } from '../wire.ts';
import type {
  Doc,
  El,
  Hist,
  IntersectionObserverConstructor,
  Loc,
  MessageEv,
  SourceConstructor,
  TextNode,
} from './dom.ts';
import { clockText, countdownText, matches, parseLockKey, permitsText, stateText, type Filter } from './view.ts';

declare const document: Doc;
declare const location: Loc;
declare const history: Hist;
declare const EventSource: SourceConstructor;
declare const IntersectionObserver: IntersectionObserverConstructor | undefined;

/** TICK_MS: how often countdowns are redrawn (only cells whose text changed are written). */
const TICK_MS = 250;

/** offsetMs: the server's clock minus this browser's, from the last message. */
let offsetMs = 0;
const nowMs = (): number => Date.now() + offsetMs;
const heard = (serverNow: string): void => {
  const t = Date.parse(serverNow);
  if (Number.isFinite(t)) offsetMs = t - Date.now();
};

function byId(id: string): El {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the page has no #${id}`);
  return el;
}

/** h makes an element with attributes and children. */
function h(tag: string, attrs: Readonly<Record<string, string>> = {}, ...children: (El | string)[]): El {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

function setText(el: El, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

/** connection shows the stream's state in the header (a polite live region). */
function connection(text: string, ok: boolean): void {
  const el = byId('conn');
  setText(el, text);
  el.className = ok ? 'conn ok' : 'conn down';
}

/**
 * Countdown is one element showing a countdown: its own text node, rewritten in place (a new
 * `textContent` would make a new node per second per lock, which the renderer's heap collects
 * late: the 1,000-lock benchmark's tab grew by 140 MB a minute that way), and whether it is on
 * screen. Only countdowns on screen (or near it) are redrawn each tick; one that scrolls in is
 * drawn at once.
 */
interface Countdown {
  readonly text: TextNode;
  expire: string | undefined;
  visible: boolean;
}
const countdowns = new Map<El, Countdown>();
const observer =
  typeof IntersectionObserver === 'function'
    ? new IntersectionObserver(
        (entries) => {
          for (const e of entries) {
            const c = countdowns.get(e.target);
            if (c === undefined) continue;
            c.visible = e.isIntersecting;
            if (c.visible) draw(c);
          }
        },
        { rootMargin: '200px' },
      )
    : undefined;
function draw(c: Countdown): void {
  const text = countdownText(c.expire, nowMs());
  if (c.text.data !== text) c.text.data = text;
}
/** countdown makes `el` count down to `expire` (or updates what it counts to). */
function countdown(el: El, expire: string | undefined): void {
  let c = countdowns.get(el);
  if (c === undefined) {
    const text = document.createTextNode('');
    el.replaceChildren(text);
    // Without IntersectionObserver every countdown counts as on screen.
    c = { text, expire, visible: observer === undefined };
    countdowns.set(el, c);
    observer?.observe(el);
  }
  c.expire = expire;
  draw(c);
}
function dropCountdown(el: El): void {
  countdowns.delete(el);
  observer?.unobserve(el);
}
function tick(): void {
  for (const c of countdowns.values()) if (c.visible) draw(c);
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

// ---------------------------------------------------------------------------------------------
// The list of locks

interface Row {
  view: LockView;
  /** state: the row's data-state attribute as last written. */
  state: string;
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
}

function listPage(): void {
  byId('list-view').hidden = false;
  const tbody = byId('lock-rows');
  const nsSelect = byId('f-namespace');
  const stateSelect = byId('f-state');
  const textInput = byId('f-text');
  const count = byId('count');
  const rows = new Map<string, Row>();
  let order: string[] = [];
  let namespaces = '';

  const params = new URLSearchParams(location.search);
  const filter = (): Filter => ({ namespace: nsSelect.value, state: stateSelect.value, text: textInput.value });
  stateSelect.value = params.get('state') ?? '';
  textInput.value = params.get('q') ?? '';
  let wantedNamespace = params.get('namespace') ?? '';

  const applyFilter = (): void => {
    const f = filter();
    let shown = 0;
    for (const row of rows.values()) {
      const show = matches(row.view, f);
      row.tr.hidden = !show;
      if (show) shown++;
    }
    setText(count, `${shown} of ${rows.size} locks shown`);
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
      applyFilter();
      remember();
    });
  }
  textInput.addEventListener('input', () => {
    applyFilter();
    remember();
  });
  byId('filters').addEventListener('submit', (e) => {
    e.preventDefault();
  });

  const refreshNamespaces = (): void => {
    const all = [...new Set([...rows.values()].map((r) => r.view.namespace))].sort();
    const joined = all.join('\n');
    if (joined === namespaces) return;
    namespaces = joined;
    nsSelect.replaceChildren(
      h('option', { value: '' }, 'All namespaces'),
      ...all.map((ns) => h('option', { value: ns }, ns)),
    );
    nsSelect.value = all.includes(wantedNamespace) ? wantedNamespace : '';
  };

  const fill = (row: Row): void => {
    const v = row.view;
    const c = row.cells;
    setText(c.namespace, v.namespace);
    setText(c.mode, v.store === 'Lease' ? v.mode : `${v.mode} (${v.store})`);
    setText(c.holder, v.mode === 'Semaphore' ? v.holders.map((p) => p.holder).join(', ') || '—' : (v.holder ?? '—'));
    setText(c.token, v.token ?? '—');
    countdown(c.expires, v.expireTime);
    setText(c.permits, permitsText(v));
    setText(c.state, stateText(v));
    // Written only when changed: every write to a cell of a 1,000-row table invalidates its style.
    const cls = `state ${v.state.toLowerCase()}${v.degraded ? ' degraded' : ''}`;
    if (c.state.className !== cls) c.state.className = cls;
    setText(c.recent, recentText(v.recent));
    if (row.state !== v.state) {
      row.state = v.state;
      row.tr.setAttribute('data-state', v.state);
    }
  };

  const makeRow = (v: LockView): Row => {
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
      h('a', { href: lockHref(v.key), class: 'lock-link' }, v.name),
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
    return { view: v, state: '', tr, cells };
  };

  const upsert = (v: LockView): void => {
    const row = rows.get(v.key);
    if (row !== undefined) {
      row.view = v;
      fill(row);
      return;
    }
    const created = makeRow(v);
    fill(created);
    rows.set(v.key, created);
    // Keep rows sorted by key: insert before the first larger key.
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((order[mid] ?? '') < v.key) lo = mid + 1;
      else hi = mid;
    }
    const next = order[lo];
    order.splice(lo, 0, v.key);
    const before = next !== undefined ? rows.get(next)?.tr : undefined;
    if (before !== undefined) tbody.insertBefore(created.tr, before);
    else tbody.append(created.tr);
  };
  const remove = (key: string): void => {
    const row = rows.get(key);
    if (row === undefined) return;
    row.tr.remove();
    dropCountdown(row.cells.expires);
    rows.delete(key);
    order = order.filter((k) => k !== key);
  };

  const source = new EventSource('/events');
  source.addEventListener('snapshot', (m: MessageEv) => {
    const s = JSON.parse(m.data) as Snapshot;
    heard(s.now);
    for (const key of [...rows.keys()]) remove(key);
    for (const v of s.locks) upsert(v);
    refreshNamespaces();
    applyFilter();
    connection(s.synced ? 'Live' : 'Live (still listing)', true);
    byId('locks').setAttribute('aria-busy', 'false');
  });
  source.addEventListener('delta', (m: MessageEv) => {
    const d = JSON.parse(m.data) as Delta;
    heard(d.now);
    for (const v of d.upsert) upsert(v);
    for (const key of d.remove) remove(key);
    refreshNamespaces();
    applyFilter();
  });
  source.addEventListener('error', () => {
    connection('Disconnected, reconnecting…', false);
  });
}

// ---------------------------------------------------------------------------------------------
// One lock

function rawHref(kind: 'pods' | 'leases' | 'events', namespace: string, name: string): string {
  return `/api/raw/${kind}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function lockPage(key: string): void {
  const view = byId('lock-view');
  view.hidden = false;
  const body = byId('lock-body');
  document.title = `${key} · fencepost dashboard`;
  setText(byId('lock-title'), key);

  const render = (d: LockDetail | null): void => {
    for (const el of [...countdowns.keys()]) dropCountdown(el);
    if (d === null) {
      body.replaceChildren(
        h('p', { class: 'empty' }, 'This lock does not exist (any more), or is not visible to you.'),
      );
      return;
    }
    const v = d.lock;
    const expires = h('span', { class: 'num expires', id: 'lock-expires' });
    countdown(expires, v.expireTime);
    const field = (term: string, ...value: (El | string)[]): El[] => [h('dt', {}, term), h('dd', {}, ...value)];
    const holderValue =
      v.holder !== undefined
        ? [h('a', { href: rawHref('pods', v.namespace, v.holder), id: 'holder-link' }, v.holder), ' (pod)']
        : ['—'];
    const fields = h(
      'dl',
      { class: 'fields' },
      ...field('Holder', ...holderValue),
      ...field('Fencing token', h('span', { class: 'num', id: 'lock-token' }, v.token ?? '—')),
      ...field('Expires in', expires, v.expireTime !== undefined ? ` (at ${clockText(v.expireTime)})` : ''),
      ...field('State', stateText(v)),
      ...field('Mode', v.store === 'Lease' ? v.mode : `${v.mode}, held in ${v.store}`),
      ...field('Acquired', v.acquireTime !== undefined ? clockText(v.acquireTime) : '—'),
      ...field('Lease duration', v.leaseDurationSeconds !== undefined ? `${v.leaseDurationSeconds}s` : '—'),
      ...field('Permits / queue', permitsText(v)),
      ...field('Holder changes', v.transitions !== undefined ? String(v.transitions) : '—'),
    );
    const links = h(
      'ul',
      { class: 'links', 'aria-label': 'Raw objects (JSON, read from the API server)' },
      h('li', {}, h('a', { href: rawHref('events', v.namespace, v.name) }, 'Events of this lock')),
      ...(v.leaseName !== undefined
        ? [h('li', {}, h('a', { href: rawHref('leases', v.namespace, v.leaseName) }, `Lease ${v.leaseName}`))]
        : []),
      ...(v.holder !== undefined
        ? [h('li', {}, h('a', { href: rawHref('pods', v.namespace, v.holder) }, `Holder pod ${v.holder}`))]
        : []),
    );
    const parts: El[] = [fields, links];
    if (v.holders.length > 0) {
      const rows = v.holders.map((p) => {
        const cd = h('td', { class: 'num' });
        countdown(cd, p.expireTime);
        return h(
          'tr',
          {},
          h('td', { class: 'num' }, String(p.permit)),
          h('td', {}, h('a', { href: rawHref('pods', v.namespace, p.holder) }, p.holder)),
          h('td', { class: 'num' }, p.token ?? '—'),
          cd,
        );
      });
      parts.push(
        h('h3', {}, 'Permits'),
        h(
          'table',
          { class: 'small' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Permit'),
              h('th', { scope: 'col' }, 'Holder'),
              h('th', { scope: 'col' }, 'Token'),
              h('th', { scope: 'col' }, 'Expires in'),
            ),
          ),
          h('tbody', {}, ...rows),
        ),
      );
    }
    if (v.queue.length > 0)
      parts.push(h('h3', {}, 'Queue'), h('ol', { class: 'queue' }, ...v.queue.map((p) => h('li', {}, p))));
    const items = d.timeline
      .slice()
      .reverse()
      .map((e) =>
        h(
          'li',
          { class: e.warning ? 'warning' : e.kind === 'Renewed' ? 'renewal' : '' },
          h('time', { datetime: e.time }, clockText(e.time)),
          ' ',
          h('strong', {}, e.kind),
          e.count > 1 && e.kind !== 'Renewed' ? ` ×${e.count}` : '',
          ' ',
          e.message,
        ),
      );
    parts.push(
      h('h3', { id: 'timeline-title' }, 'Timeline (newest first)'),
      items.length > 0
        ? h('ol', { class: 'timeline', 'aria-labelledby': 'timeline-title' }, ...items)
        : h('p', { class: 'empty' }, 'Nothing seen yet: Events expire after an hour on most clusters.'),
    );
    body.replaceChildren(...parts);
  };

  const source = new EventSource(`/events?lock=${encodeURIComponent(key)}`);
  source.addEventListener('detail', (m: MessageEv) => {
    const d = JSON.parse(m.data) as DetailEvent;
    heard(d.now);
    render(d.detail);
    connection('Live', true);
  });
  source.addEventListener('error', () => {
    connection('Disconnected, reconnecting…', false);
  });
}

const key = new URLSearchParams(location.search).get('lock');
if (key !== null && parseLockKey(key) !== undefined) lockPage(key);
else listPage();
setInterval(tick, TICK_MS);
