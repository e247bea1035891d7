/**
 * The race page (a plain ES module, no framework). It follows the server's events (`/events`: a
 * `hello` with everything so far, then one `race` event each), folds them with model.ts, and
 * redraws: the worker cards, the lease countdown, the ledger, the timeline's lanes and list. The
 * buttons POST actions; their results arrive as events like everybody else's, so two open pages
 * show the same race.
 *
 * Countdowns use the server's clock (the offset comes with every hello) and are redrawn every
 * TICK_MS without traffic.
 */
import type { Hello, RaceEvent, RaceInfo } from '../events.ts';
import { startCodePanel } from './code-panel.ts';
import type { Control, Fetch, MessageEv, PageDoc, SourceConstructor, SvgEl } from './dom.ts';
import { DEFAULT_GEOMETRY, laneShapes } from './lanes.ts';
import {
  canFreeze,
  initialView,
  leaseText,
  podText,
  quote,
  secondsText,
  step,
  type Entry,
  type RaceView,
} from './model.ts';

declare const document: PageDoc;
declare const EventSource: SourceConstructor;
declare const fetch: Fetch;

/** TICK_MS: how often countdowns and the lanes are redrawn. */
const TICK_MS = 200;
const SVG_NS = 'http://www.w3.org/2000/svg';

let info: RaceInfo | undefined;
let view: RaceView = initialView([]);
/** events: what the lanes are drawn from (renewals left out: they only move the lease card's countdown). */
let events: RaceEvent[] = [];
/** lastStale: the latest stale write, for the ledger card's outcome line. */
let lastStale: Extract<RaceEvent, { type: 'refused' | 'overwrote' }> | undefined;
let offsetMs = 0;
let pending = false;
const serverNow = (): number => Date.now() + offsetMs;

function byId(id: string): Control {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the page has no #${id}`);
  return el;
}

function setText(el: Control, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

function status(text: string, error = false): void {
  const el = byId('status');
  setText(el, text);
  el.className = error ? 'status error' : 'status';
}

/** entryItem renders one line of the timeline list. */
function entryItem(e: Entry): Control {
  const li = document.createElement('li');
  li.className = e.tone;
  if (e.pod !== undefined) li.setAttribute('data-pod', e.pod);
  const time = document.createElement('time');
  time.textContent = secondsText(e.at, view.startedAt);
  li.append(time, e.text);
  return li;
}

/** apply folds one event in; `live` events also go to the list and the live region. */
function apply(e: RaceEvent, live: boolean): void {
  if (e.type !== 'lease') events.push(e);
  if (e.type === 'refused' || e.type === 'overwrote') lastStale = e;
  const r = step(view, e);
  view = r.view;
  if (r.entry !== undefined) {
    byId('timeline').append(entryItem(r.entry));
    if (live && r.entry.important) setText(byId('announce'), r.entry.text);
    // The freeze's confirmation under the buttons is stale once the pod wakes up.
    if (live && e.type === 'thawed') status('');
  }
}

/** render redraws what depends on the view and the clock. */
function render(): void {
  const now = serverNow();
  for (const [pod, p] of Object.entries(view.pods)) {
    const card = document.getElementById(`pod-${pod}`);
    if (card === null) continue;
    card.setAttribute('data-status', p.status);
    card.setAttribute('data-stale', p.stale ?? '');
    const text = podText(p, view.frozen?.until, now);
    const statusEl = document.getElementById(`pod-${pod}-status`);
    if (statusEl !== null) setText(statusEl, text);
    const staleEl = document.getElementById(`pod-${pod}-stale`);
    if (staleEl !== null)
      setText(
        staleEl,
        p.stale === 'refused'
          ? 'Its stale write was refused.'
          : p.stale === 'overwrote'
            ? 'Its stale write overwrote newer data.'
            : '',
      );
  }
  setText(byId('lease-text'), leaseText(view, now));
  const bar = byId('lease-bar');
  const left = view.lease !== undefined ? Math.max(0, view.lease.expiresAt - now) : 0;
  bar.setAttribute('value', String(Math.round((left / ((info?.leaseSeconds ?? 1) * 1000)) * 1000)));
  setText(byId('ledger'), quote(view.ledger));
  const outcome = byId('outcome');
  const last = lastStale;
  setText(
    outcome,
    last?.type === 'refused'
      ? `The guard refused ${last.pod}'s stale token ${last.token}.`
      : last?.type === 'overwrote'
        ? `${last.pod}'s stale token ${last.token} overwrote the newer write.`
        : '',
  );
  outcome.className =
    last?.type === 'refused' ? 'outcome good' : last?.type === 'overwrote' ? 'outcome bad' : 'outcome';

  const guard = byId('guard');
  if (!pending) guard.checked = view.guard;
  const frozen = view.frozen !== undefined;
  byId('race').disabled = pending || frozen;
  guard.disabled = pending || frozen;
  byId('freeze').disabled = pending || !canFreeze(view);
  byId('thaw').hidden = !frozen;
  setText(byId('race'), view.round === undefined ? 'Race worker A and worker B' : 'Race again');
  drawLanes(now);
}

function drawLanes(now: number): void {
  const svg = document.getElementById('lanes');
  const wrap = document.getElementById('lanes-wrap');
  if (svg === null || info === undefined) return;
  const width = Math.max(300, wrap?.clientWidth ?? 600);
  const { shapes, height } = laneShapes(events, info.pods, now, { ...DEFAULT_GEOMETRY, width });
  const lanes = svg as unknown as SvgEl;
  lanes.setAttribute('viewBox', `0 0 ${width} ${height}`);
  lanes.setAttribute('height', String(height));
  lanes.replaceChildren(
    ...shapes.map((s) => {
      const el = document.createElementNS(SVG_NS, s.tag);
      for (const [k, v] of Object.entries(s.attrs)) el.setAttribute(k, v);
      if (s.text !== undefined) el.append(s.text);
      return el;
    }),
  );
}

/** post sends an action; its effects arrive as events. */
async function post(path: string, body: Readonly<Record<string, unknown>> = {}): Promise<unknown> {
  pending = true;
  render();
  try {
    const r = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = (await r.json()) as { message?: string; result?: unknown };
    if (!r.ok) throw new Error(answer.message ?? `HTTP ${r.status}`);
    return answer.result;
  } finally {
    pending = false;
    render();
  }
}

function wireControls(): void {
  const act = (what: string, path: string, body?: Readonly<Record<string, unknown>>): void => {
    status(what);
    post(path, body).then(
      (result) => {
        const r = result as { pod?: string; token?: string } | null;
        status(r?.pod !== undefined ? `Froze ${r.pod}, which believes it holds token ${r.token ?? '?'}.` : '');
      },
      (err: unknown) => {
        status(err instanceof Error ? err.message : String(err), true);
      },
    );
  };
  byId('race').addEventListener('click', () => {
    act('Starting both workers…', '/api/race');
  });
  const guard = byId('guard');
  guard.addEventListener('change', () => {
    act(guard.checked ? 'Turning the guard on…' : 'Turning the guard off…', '/api/guard', { on: guard.checked });
  });
  byId('freeze').addEventListener('click', () => {
    const seconds = Number(byId('pause').value);
    if (!(Number.isFinite(seconds) && seconds >= 1 && seconds <= 120)) {
      status('The pause must be between 1 and 120 seconds.', true);
      byId('pause').focus();
      return;
    }
    act(`Waiting for the holder's next check, then SIGSTOP for ${seconds} s…`, '/api/freeze', { seconds });
  });
  byId('thaw').addEventListener('click', () => {
    act('Waking it…', '/api/thaw');
  });
}

function hello(h: Hello): void {
  info = h.info;
  offsetMs = h.now - Date.now();
  view = initialView(h.info.pods);
  events = [];
  lastStale = undefined;
  byId('timeline').replaceChildren();
  setText(byId('key'), h.info.key);
  setText(byId('lock'), h.info.lock);
  setText(byId('lease-seconds'), String(h.info.leaseSeconds));
  setText(byId('ledger-title'), `Redis key "${h.info.key}"`);
  const pause = byId('pause');
  if (pause.getAttribute('data-set') === null) {
    pause.value = String(h.info.pauseSeconds);
    pause.setAttribute('data-set', 'server');
  }
  for (const e of h.events) apply(e, false);
  render();
}

function connect(): void {
  const conn = byId('conn');
  const source = new EventSource('/events');
  source.addEventListener('hello', (m: MessageEv) => {
    hello(JSON.parse(m.data) as Hello);
    setText(conn, 'Live');
    conn.className = 'conn ok';
  });
  source.addEventListener('race', (m: MessageEv) => {
    apply(JSON.parse(m.data) as RaceEvent, true);
    render();
  });
  source.addEventListener('error', () => {
    setText(conn, 'Disconnected: retrying…');
    conn.className = 'conn down';
  });
}

startCodePanel();
wireControls();
connect();
setInterval(render, TICK_MS);
