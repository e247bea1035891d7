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
 * The endpoints are one table (ROUTES below, a handler each) under one dispatcher (http-router.ts):
 * every error is an RFC 9457 problem (problem.ts); every request must name the agent by a loopback
 * Host and come from no web page, and every POST carries `Content-Type: application/json` and the
 * body `{}` (local-only.ts says why); otherwise 403 `foreign-host` / `browser-request` or 415
 * `json-body-required`, before anything else is looked at.
 */
import { createServer, type Server } from 'node:http';
import { listenOn } from '../observability/http.ts';
import { acquire, type LockCall } from './http-acquire.ts';
import { Router, messageOf, sendJson as json, sendText as text, type Route, type RouteCall } from './http-router.ts';
import { problem, sendProblem } from './problem.ts';
import { NotRunHolderError } from './run-completions.ts';
import { EventJournal, SSE_RETRY_MS, formatSse, type SseFrame, type StoppingEvent } from './sse.ts';
import type { AgentSession } from './agent-session.ts';
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

/** complete: POST /v1/locks/NAME/complete?runId=ID&token=T. */
function complete({ res, url, name, session }: LockCall): void {
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
}

/** drained: POST /v1/locks/NAME/drained. */
function drained({ res, name, session }: LockCall): void {
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
}

/** release: POST /v1/locks/NAME/release. */
function release({ res, name, session }: LockCall): void {
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

  /** onLock resolves the path's lock name to the lock's session and journal for `handle`. */
  const onLock =
    (handle: (call: LockCall) => void) =>
    (call: RouteCall): void => {
      let name: string;
      try {
        name = decodeURIComponent(call.params.name ?? '');
      } catch {
        sendProblem(call.res, problem('invalid-request', 'the lock name in the path is not valid percent-encoding'));
        return;
      }
      const session = sessions.get(name);
      const journal = journals.get(name);
      if (session === undefined || journal === undefined) {
        sendProblem(
          call.res,
          problem(
            'unknown-lock',
            `this agent does not manage lock ${JSON.stringify(name)} (start it with --lock ${name})`,
            { locks: [...sessions.keys()] },
          ),
        );
        return;
      }
      handle({ ...call, name, session, journal });
    };

  /** events: GET /v1/locks/NAME/events, from the frame after Last-Event-ID when the client resumes. */
  const events = ({ req, name, session, journal, openStream }: LockCall): void => {
    const last = req.headers['last-event-id'];
    const opening = journal.opening(session.snapshot(), typeof last === 'string' ? last : undefined);
    openStream(`retry: ${SSE_RETRY_MS}\n\n${formatSse(opening)}`, (send) => {
      const listener = (f: SseFrame): void => {
        send(formatSse([f]));
      };
      listeners.get(name)?.add(listener);
      return () => {
        listeners.get(name)?.delete(listener);
      };
    });
  };

  const table: readonly Route[] = [
    {
      method: 'GET',
      path: '/openapi.json',
      handle: ({ res }) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(OPENAPI_TEXT);
      },
    },
    { method: 'GET', path: '/healthz', handle: ({ res }) => text(res, 200, 'ok\n') },
    {
      method: 'GET',
      path: '/readyz',
      handle: ({ res }) => {
        const ok = routes.ready();
        text(res, ok ? 200 : 503, ok ? 'ok\n' : 'not ready: the Lease watches have not synced\n');
      },
    },
    {
      method: 'GET',
      path: '/v1/locks/{name}',
      handle: onLock(({ res, session }) => json(res, 200, session.snapshot())),
    },
    { method: 'GET', path: '/v1/locks/{name}/events', stream: true, handle: onLock(events) },
    { method: 'POST', path: '/v1/locks/{name}/acquire', handle: onLock((call) => acquire(call, routes.permits)) },
    { method: 'POST', path: '/v1/locks/{name}/complete', handle: onLock(complete) },
    { method: 'POST', path: '/v1/locks/{name}/drained', handle: onLock(drained) },
    { method: 'POST', path: '/v1/locks/{name}/release', handle: onLock(release) },
  ];
  const router = new Router(table, { host, ...(routes.log !== undefined ? { log: routes.log } : {}) });
  const server: Server = createServer(router.dispatch);
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
    busy: () => router.answering > 0,
    stop: () =>
      new Promise((r) => {
        router.closeStreams();
        server.close(() => r());
        server.closeIdleConnections();
        // Killing a connection under a request being answered would lose its answer (a release
        // the application asked for would look failed): let those finish, within a bound.
        const force = setTimeout(() => server.closeAllConnections(), router.answering > 0 ? STOP_GRACE_MS : 0);
        router.whenIdle(() => {
          clearTimeout(force);
          server.closeAllConnections();
        });
      }),
  };
}
