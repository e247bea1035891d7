/**
 * POST /v1/locks/NAME/acquire?wait=D&runId=ID&ifHeld=P, the agent API's one long handler
 * (http-api.ts routes it): ask for the lock, then answer 200 once held, 423 `not-granted` when not
 * held within `wait`, 409 `already-done` when the run id was completed, and with ifHeld=fail 423
 * `held` as soon as other pods hold it — leaving no request of this call queued.
 */
import type { AgentSession } from './agent-session.ts';
import { heldElsewhere, heldText, type HeldElsewhere } from './held-elsewhere.ts';
import { messageOf, sendJson as json, type RouteCall } from './http-router.ts';
import { problem, sendProblem } from './problem.ts';
import { AlreadyDoneError, requestRun } from './run-once.ts';
import { parseDuration } from '../config/duration.ts';
import type { ServerResponse } from 'node:http';
import type { EventJournal } from './sse.ts';

/** LockCall is a request on one lock this agent manages: its name (decoded), session and event journal. */
export interface LockCall extends RouteCall {
  readonly name: string;
  readonly session: AgentSession;
  readonly journal: EventJournal;
}

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

/**
 * acquire answers an acquire request; `permits` reads spec.permits of a Semaphore lock for
 * ifHeld=fail (absent: no lock is a Semaphore).
 */
export function acquire(
  { res, url, name, session }: LockCall,
  permits: ((lock: string) => Promise<number | undefined>) | undefined,
): void {
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
  const permitsAsked = failIfHeld ? (permits?.(name) ?? Promise.resolve(undefined)) : undefined;
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
}
