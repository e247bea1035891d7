/**
 * The agent's local HTTP API (loopback only), usable with curl from any language. Its contract is
 * the OpenAPI 3.1 document src/agent/openapi.json, served at `GET /openapi.json`:
 *   GET  /v1/locks/NAME                  → LockSnapshot JSON
 *   GET  /v1/locks/NAME/events           → Server-Sent Events (sse.ts): `retry:`, then `state`, then
 *                                          granted/renewed/lost/released, draining/handoverCancelled
 *                                          (a planned handover), and `stopping` (cli/agent.ts),
 *                                          each with an `id:`
 *   POST /v1/locks/NAME/acquire?wait=D&runId=ID&ifHeld=P → asks for the lock (Mutex: joins the FIFO
 *                                          queue), then 200 when held (waits up to D, default 0), 423
 *                                          problem `not-granted` when not held in time, 409
 *                                          problem `already-done` when the run id was completed
 *                                          (before or while waiting; run-once.ts, as acquire());
 *                                          ifHeld=fail: 423 problem `held` when another pod holds
 *                                          it, and no request of this call is left queued (as
 *                                          `fencepost exec --if-held`)
 *   POST /v1/locks/NAME/complete?runId=ID&token=T → reports the run completed, only while this
 *                                          pod holds the term with token T (else 409 `not-held`);
 *                                          call it before release, as `fencepost exec` does
 *   POST /v1/locks/NAME/drained          → during a planned handover (snapshot.draining, SSE
 *                                          `draining`): the app has drained; the agent stops
 *                                          believing and releases to the successor now; 200 with the
 *                                          snapshot after the release, 409 problem `not-draining`
 *                                          when no handover is under way
 *   POST /v1/locks/NAME/release          → withdraws the request and releases the Lease; 200 after
 *   GET  /healthz, /readyz               → for the pod's own containers (the kubelet's probes and
 *                                          /metrics have their own listeners, see cli/agent.ts)
 * Every error is an RFC 9457 problem (problem.ts). Every request must name the agent by a loopback
 * Host and come from no web page, and every POST carries `Content-Type: application/json` and the
 * body `{}` (local-only.ts says why); otherwise 403 `foreign-host` / `browser-request` or 415
 * `json-body-required`, before anything else is looked at.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { parseDuration } from '../config/duration.ts';
import { listenOn } from '../observability/http.ts';
import { bodyRefusal, browserRefusal, contentTypeRefusal, hostRefusal, MAX_BODY_BYTES } from './local-only.ts';
import { problem, sendProblem } from './problem.ts';
import { NotRunHolderError } from './run-completions.ts';
import { AlreadyDoneError, requestRun } from './run-once.ts';
import { EventJournal, SSE_RETRY_MS, formatSse, type SseFrame, type StoppingEvent } from './sse.ts';
import type { AgentSession } from './agent-session.ts';
import { heldElsewhere, heldText, type HeldElsewhere } from './held-elsewhere.ts';
import openapi from './openapi.json' with { type: 'json' };

/** AgentApi is a listening API server. */
export interface AgentApi {
  readonly address: string;
  /** announce sends an event of the agent's own (not a session's) on the lock's event streams. */
  announce(e: StoppingEvent): void;
  /**
   * busy: a request other than an event stream is being answered (a release, an acquire …). The
   * plain-sidecar shutdown waits for it: a release the application asked for ends the term at its
   * start, and its Lease write and answer come after.
   */
  busy(): boolean;
  /**
   * stop closes the event streams and stops accepting connections; requests being answered get up
   * to STOP_GRACE_MS to finish before their connections are closed.
   */
  stop(): Promise<void>;
}

/** STOP_GRACE_MS bounds how long stop() waits for requests being answered. */
export const STOP_GRACE_MS = 5000;

/** AgentApiRoutes are what the API needs besides the sessions. */
export interface AgentApiRoutes {
  /** ready: the sessions have synced (the same check as the kubelet's /readyz). */
  readonly ready: () => boolean;
  /** log receives handler failures (a pino Logger fits). */
  readonly log?: { error(obj: object, msg: string): void };
  /**
   * permits is spec.permits of the lock when it is a Semaphore (held-elsewhere.ts
   * semaphorePermits), asked for each `ifHeld=fail` request; absent: no lock is a Semaphore.
   */
  readonly permits?: (lock: string) => Promise<number | undefined>;
}

const OPENAPI_TEXT = `${JSON.stringify(openapi)}\n`;

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** HeldElsewhereError: under ifHeld=fail, the lock was granted to other pods while this one waited. */
class HeldElsewhereError extends Error {
  readonly held: HeldElsewhere;
  constructor(held: HeldElsewhere) {
    super(`held by ${heldText(held)}`);
    this.name = 'HeldElsewhereError';
    this.held = held;
  }
}

/**
 * waitHeld resolves true once the session holds the lock, false after waitMs or if the client went
 * away (the response closed). With `heldNow` (ifHeld=fail), it rejects with HeldElsewhereError as
 * soon as that says other pods hold the lock.
 */
function waitHeld(
  session: AgentSession,
  waitMs: number,
  res: ServerResponse,
  heldNow: (() => HeldElsewhere | undefined) | undefined,
): Promise<boolean> {
  if (session.heldToken() !== undefined) return Promise.resolve(true);
  const other = heldNow?.();
  if (other !== undefined) return Promise.reject(new HeldElsewhereError(other));
  if (waitMs <= 0) return Promise.resolve(false);
  return new Promise((resolve, reject) => {
    const done = (v: boolean | HeldElsewhereError): void => {
      clearTimeout(timer);
      off();
      offHolder();
      res.off('close', gone);
      if (v instanceof HeldElsewhereError) reject(v);
      else resolve(v);
    };
    const off = session.onEvent((e) => {
      if (e.type === 'granted') done(true);
    });
    const offHolder = session.onHolderChange(() => {
      const held = heldNow?.();
      if (held !== undefined) done(new HeldElsewhereError(held));
    });
    const gone = (): void => {
      done(false);
    };
    const timer = setTimeout(() => {
      done(session.heldToken() !== undefined);
    }, waitMs);
    // The response's close, not the request's: the request closes as soon as its body was read.
    res.on('close', gone);
  });
}

/** ALLOWED lists the method each path shape allows (for 405 and its `allow` header). */
const ALLOWED: Readonly<Record<string, string>> = {
  '': 'GET',
  '/events': 'GET',
  '/acquire': 'POST',
  '/complete': 'POST',
  '/drained': 'POST',
  '/release': 'POST',
};

/** serveAgentApi listens on host:port (loopback; checked by the config) for the given sessions. */
export async function serveAgentApi(
  host: string,
  port: number,
  sessions: ReadonlyMap<string, AgentSession>,
  routes: AgentApiRoutes,
): Promise<AgentApi> {
  const stream = Date.now().toString(36);
  const journals = new Map<string, EventJournal>();
  // Every frame of a lock (its session's events and the agent's own) goes to its open streams.
  const listeners = new Map<string, Set<(f: SseFrame) => void>>();
  const publish = (name: string, journal: EventJournal, e: Parameters<EventJournal['record']>[0]): void => {
    const frame = journal.record(e);
    for (const l of listeners.get(name) ?? []) l(frame);
  };
  for (const [name, session] of sessions) {
    const journal = new EventJournal(stream);
    session.onEvent((e) => {
      publish(name, journal, e);
    });
    session.onHandover((e) => {
      publish(name, journal, e);
    });
    journals.set(name, journal);
    listeners.set(name, new Set());
  }
  const streams = new Set<() => void>();

  // Every container of the pod can reach this server: no request may take the agent down. A
  // target that is not a path, or a name with malformed percent-encoding, is a 400; anything the
  // handler throws is a 500, logged, and the server goes on.
  // Requests being answered, event streams aside (they end only with the agent): see busy().
  let answering = 0;
  const answered: (() => void)[] = [];
  const server: Server = createServer((req, res) => {
    if (!/\/events$/.test(req.url?.split('?')[0] ?? '')) {
      answering++;
      res.once('close', () => {
        answering--;
        if (answering === 0) for (const f of answered.splice(0)) f();
      });
    }
    const run = (): void => {
      try {
        handle(req, res);
      } catch (err) {
        routes.log?.error({ err, method: req.method, url: req.url?.slice(0, 200) }, 'HTTP handler failed');
        if (!res.headersSent) sendProblem(res, problem('internal-error', 'the request failed; see the agent log'));
        else res.destroy();
      }
    };
    // Who may ask at all (local-only.ts), before the path is even read: reads of lock state too.
    const refused = hostRefusal(req.headers, host) ?? browserRefusal(req.headers);
    if (refused !== undefined) {
      sendProblem(res, refused, { connection: 'close' });
      return;
    }
    if (req.method !== 'POST') {
      run();
      return;
    }
    const notJson = contentTypeRefusal(req.headers);
    if (notJson !== undefined) {
      sendProblem(res, notJson, { connection: 'close' });
      return;
    }
    let body = '';
    let tooLong = false;
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      if (tooLong) return;
      body += chunk;
      if (body.length > MAX_BODY_BYTES) {
        tooLong = true;
        sendProblem(
          res,
          problem('json-body-required', `the body is longer than ${MAX_BODY_BYTES} bytes; it is {}`, { rule: 'body' }),
          { connection: 'close' },
        );
      }
    });
    req.on('end', () => {
      if (tooLong) return;
      const bad = bodyRefusal(body);
      if (bad !== undefined) sendProblem(res, bad);
      else run();
    });
  });
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://agent');
    } catch {
      sendProblem(res, problem('invalid-request', 'the request target is not a path'));
      return;
    }
    const path = url.pathname;
    const method = req.method ?? '';
    const only = (allowed: string): boolean => {
      if (method === allowed) return true;
      sendProblem(res, problem('method-not-allowed', `${method} is not allowed on ${path}; use ${allowed}`), {
        allow: allowed,
      });
      return false;
    };
    if (path === '/openapi.json') {
      if (only('GET')) res.writeHead(200, { 'content-type': 'application/json' }).end(OPENAPI_TEXT);
      return;
    }
    if (path === '/healthz') {
      if (only('GET')) text(res, 200, 'ok\n');
      return;
    }
    if (path === '/readyz') {
      if (only('GET')) {
        const ok = routes.ready();
        text(res, ok ? 200 : 503, ok ? 'ok\n' : 'not ready: the Lease watches have not synced\n');
      }
      return;
    }
    const m = /^\/v1\/locks\/([^/]+)(\/events|\/acquire|\/complete|\/drained|\/release)?$/.exec(path);
    if (m === null) {
      sendProblem(res, problem('no-route', `no endpoint ${path}; the API is described at /openapi.json`));
      return;
    }
    const action = m[2] ?? '';
    if (!only(ALLOWED[action] ?? 'GET')) return;
    let name: string;
    try {
      name = decodeURIComponent(m[1] ?? '');
    } catch {
      sendProblem(res, problem('invalid-request', 'the lock name in the path is not valid percent-encoding'));
      return;
    }
    const session = sessions.get(name);
    const journal = journals.get(name);
    if (session === undefined || journal === undefined) {
      sendProblem(
        res,
        problem(
          'unknown-lock',
          `this agent does not manage lock ${JSON.stringify(name)} (start it with --lock ${name})`,
          { locks: [...sessions.keys()] },
        ),
      );
      return;
    }
    switch (action) {
      case '':
        json(res, 200, session.snapshot());
        return;
      case '/events': {
        res.writeHead(200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
        });
        const last = req.headers['last-event-id'];
        res.write(
          `retry: ${SSE_RETRY_MS}\n\n${formatSse(journal.opening(session.snapshot(), typeof last === 'string' ? last : undefined))}`,
        );
        const send = (f: SseFrame): void => {
          res.write(formatSse([f]));
        };
        listeners.get(name)?.add(send);
        const off = (): void => {
          listeners.get(name)?.delete(send);
        };
        const ping = setInterval(() => {
          res.write(': ping\n\n');
        }, 15_000);
        const close = (): void => {
          off();
          clearInterval(ping);
          streams.delete(close);
        };
        streams.add(close);
        req.on('close', close);
        return;
      }
      case '/acquire': {
        let waitMs: number;
        try {
          waitMs = parseDuration(url.searchParams.get('wait') ?? '0', 'wait');
        } catch (err) {
          sendProblem(res, problem('invalid-parameter', messageOf(err), { parameter: 'wait' }));
          return;
        }
        const ifHeld = url.searchParams.get('ifHeld') ?? 'wait';
        if (ifHeld !== 'wait' && ifHeld !== 'fail') {
          sendProblem(
            res,
            problem('invalid-parameter', `ifHeld: must be wait or fail, got ${JSON.stringify(ifHeld)}`, {
              parameter: 'ifHeld',
            }),
          );
          return;
        }
        const failIfHeld = ifHeld === 'fail';
        const runId = url.searchParams.get('runId') ?? undefined;
        const sendHeld = (held: HeldElsewhere): void => {
          sendProblem(
            res,
            problem('held', `lock ${name} is held by ${heldText(held)}; no request of this call is left queued`, {
              lock: name,
              holder: held.holder.name,
              snapshot: session.snapshot(),
            }),
          );
        };
        // Withdraws this call's request, and hands back a grant that came in between. A failure is
        // answered 502 instead (the request may still be queued), never `held` or `not-granted`.
        const withdrawRequest = async (): Promise<boolean> => {
          try {
            await session.withdraw();
            if (session.heldToken() !== undefined) await session.release();
            return true;
          } catch (err) {
            if (!res.writableEnded && !res.destroyed)
              sendProblem(
                res,
                problem('kubernetes-unavailable', `Failed to withdraw the request: ${messageOf(err)}`, { lock: name }),
              );
            return false;
          }
        };
        // ifHeld=fail: a Semaphore's permits are read first (held means every permit taken).
        const permitsAsked = failIfHeld ? (routes.permits?.(name) ?? Promise.resolve(undefined)) : undefined;
        const proceed = (heldNow: (() => HeldElsewhere | undefined) | undefined): void => {
          // Held when asked: answer before requesting anything, so there is nothing to withdraw.
          const held = heldNow?.();
          if (held !== undefined) {
            sendHeld(held);
            return;
          }
          requestRun(session, name, runId, () => waitHeld(session, waitMs, res, heldNow)).then(
            async (held) => {
              if (held) {
                if (!res.writableEnded && !res.destroyed) json(res, 200, session.snapshot());
                return;
              }
              // ifHeld=fail does not stay queued: not granted in time, the request is withdrawn.
              if (failIfHeld && !(await withdrawRequest())) return;
              if (res.writableEnded || res.destroyed) return;
              sendProblem(
                res,
                problem(
                  'not-granted',
                  failIfHeld
                    ? `lock ${name} was not granted to this pod within ${waitMs} ms; the request was withdrawn (ifHeld=fail)`
                    : `lock ${name} was not granted to this pod within ${waitMs} ms; the request stays queued (Mutex) — ask again, or release to withdraw it`,
                  { lock: name, snapshot: session.snapshot() },
                ),
              );
            },
            async (err: unknown) => {
              if (err instanceof HeldElsewhereError) {
                if ((await withdrawRequest()) && !res.writableEnded && !res.destroyed) sendHeld(err.held);
                return;
              }
              if (res.writableEnded || res.destroyed) return;
              if (err instanceof AlreadyDoneError) {
                sendProblem(res, problem('already-done', `${err.message}; do not run it`, { lock: name, runId }));
                return;
              }
              sendProblem(
                res,
                problem('kubernetes-unavailable', `Failed to request the lock: ${messageOf(err)}`, { lock: name }),
              );
            },
          );
        };
        if (permitsAsked === undefined) proceed(undefined);
        else
          permitsAsked.then(
            (permits) => {
              proceed(() => heldElsewhere(session, permits));
            },
            (err: unknown) => {
              sendProblem(
                res,
                problem('kubernetes-unavailable', `Failed to read lock ${name}'s permits: ${messageOf(err)}`, {
                  lock: name,
                }),
              );
            },
          );
        return;
      }
      case '/complete': {
        const runId = url.searchParams.get('runId') ?? '';
        const token = url.searchParams.get('token') ?? '';
        if (runId === '') {
          sendProblem(
            res,
            problem('invalid-parameter', 'runId is required: the run to report completed', { parameter: 'runId' }),
          );
          return;
        }
        if (!/^[0-9]+$/.test(token)) {
          sendProblem(
            res,
            problem('invalid-parameter', 'token is required: the decimal fencing token of the term that did the run', {
              parameter: 'token',
            }),
          );
          return;
        }
        const held = session.heldToken();
        if (held === undefined || held !== BigInt(token)) {
          sendProblem(
            res,
            problem(
              'not-held',
              `this pod does not hold lock ${name} with token ${token} (${held === undefined ? 'it holds no term' : `it holds token ${held}`}); a run is reported completed only by the term that did it`,
              { lock: name, snapshot: session.snapshot() },
            ),
          );
          return;
        }
        session.complete(runId, undefined, held).then(
          () => {
            json(res, 200, session.snapshot());
          },
          (err: unknown) => {
            if (err instanceof NotRunHolderError) {
              sendProblem(res, problem('not-held', err.message, { lock: name, snapshot: session.snapshot() }));
              return;
            }
            sendProblem(
              res,
              problem('kubernetes-unavailable', `Failed to report the run completed: ${messageOf(err)}`, {
                lock: name,
              }),
            );
          },
        );
        return;
      }
      case '/drained':
        session.drained().then(
          (was) => {
            if (was) json(res, 200, session.snapshot());
            else
              sendProblem(
                res,
                problem('not-draining', `no planned handover of lock ${name} is under way on this pod`, {
                  lock: name,
                  snapshot: session.snapshot(),
                }),
              );
          },
          (err: unknown) => {
            sendProblem(res, problem('internal-error', `Failed to hand the lock over: ${messageOf(err)}`));
          },
        );
        return;
      default: // '/release'
        session
          .withdraw()
          .then(() => session.release())
          .then(
            () => {
              json(res, 200, session.snapshot());
            },
            (err: unknown) => {
              sendProblem(
                res,
                problem('kubernetes-unavailable', `Failed to release the lock: ${messageOf(err)}`, { lock: name }),
              );
            },
          );
    }
  };
  await listenOn(server, port, host);
  const a = server.address();
  const address =
    a !== null && typeof a === 'object'
      ? `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`
      : `${host}:${port}`;
  return {
    address,
    announce: (e) => {
      const journal = journals.get(e.lock);
      if (journal !== undefined) publish(e.lock, journal, e);
    },
    busy: () => answering > 0,
    stop: () =>
      new Promise((r) => {
        for (const close of [...streams]) close();
        server.close(() => r());
        server.closeIdleConnections();
        // Killing a connection under a request being answered would lose its answer (a release
        // the application asked for would look failed): let those finish, within a bound.
        const force = setTimeout(() => server.closeAllConnections(), answering > 0 ? STOP_GRACE_MS : 0);
        answered.push(() => {
          clearTimeout(force);
          server.closeAllConnections();
        });
        if (answering === 0) for (const f of answered.splice(0)) f();
      }),
  };
}
