/**
 * The dashboard page's entry module (a plain ES module, no framework): the list of every lock
 * (page/list.ts), or with `?lock=NAMESPACE/NAME` one lock and its timeline (page/lock.ts). Both
 * follow the server's Server-Sent Events (`/events`): a snapshot, then only what changed.
 * Countdowns are computed here from the absolute expiry times the server sends, corrected by the
 * offset between the server's clock and this browser's (from each message's `now`), so they move
 * without any traffic.
 */
import type { Loc } from './dom.ts';
import { listPage } from './list.ts';
import { lockPage } from './lock.ts';
import { tick } from './ui.ts';
import { parseLockKey } from './view.ts';

declare const location: Loc;

/** TICK_MS: how often countdowns are redrawn (only text that changed is written). */
const TICK_MS = 250;

const key = new URLSearchParams(location.search).get('lock');
if (key !== null && parseLockKey(key) !== undefined) lockPage(key);
else listPage();
setInterval(tick, TICK_MS);
