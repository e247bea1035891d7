/**
 * The page's view of one lock (`?lock=NAMESPACE/NAME`): holder, token, countdown, links to the
 * holder pod, the lock's Events and its Lease, the Semaphore permits, the Mutex queue and the
 * timeline. It follows `GET /events?lock=…` and redraws on each `detail` event (one lock: a few
 * dozen elements).
 */
import type { DetailEvent, LockDetail } from '../wire.ts';
import type { Doc, El, MessageEv, SourceConstructor } from './dom.ts';
import { byId, connection, countdown, dropAllCountdowns, h, heard, setText } from './ui.ts';
import { clockText, permitsText, stateText } from './view.ts';

declare const document: Doc;
declare const EventSource: SourceConstructor;

function rawHref(kind: 'pods' | 'leases' | 'events', namespace: string, name: string): string {
  return `/api/raw/${kind}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

/** lockPage shows one lock (`?lock=NAMESPACE/NAME`) and follows its `detail` events. */
export function lockPage(key: string): void {
  const view = byId('lock-view');
  view.hidden = false;
  const body = byId('lock-body');
  document.title = `${key} · fencepost dashboard`;
  setText(byId('lock-title'), key);

  const render = (d: LockDetail | null): void => {
    dropAllCountdowns();
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
