/**
 * JSON logs with pino, in the shape log pipelines built for controller-runtime operators already
 * read: one JSON object per line with `ts` (RFC 3339, UTC), `level` as a word (`debug`, `info`,
 * `warn`, `error`), `msg`, and for a failure `error` (the error's message, with its causes after
 * `: `) plus `stacktrace` (its stack frames). Reconcile logs add controller-runtime's keys
 * (`controller`, `controllerGroup`, `controllerKind`, `namespace`, `name`, `reconcileID`; see
 * runtime/controller's ReconcileLogFields).
 *
 * Call sites use constant, capitalised, past-tense messages ("Granted Lease"),
 * variable parts in fields, errors as `log.x({ err }, msg)` (or `log.x(err, msg)`); the mapping
 * of `err` to `error` happens here, at output.
 */
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/**
 * LOG_LEVELS are the levels `createLogger` accepts, least to most severe, then `silent`; the same
 * words appear in the output's `level` field.
 */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const satisfies readonly LevelWithSilent[];

/**
 * errorText renders an error for the `error` field: its message, then each `cause`'s message
 * after `: ` (Go's wrapped-error style); a non-Error is stringified.
 */
export function errorText(e: unknown): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  for (
    let cur: unknown = e;
    cur !== undefined && cur !== null && !seen.has(cur);
    cur = cur instanceof Error ? cur.cause : undefined
  ) {
    seen.add(cur);
    parts.push(
      cur instanceof Error
        ? cur.message !== ''
          ? cur.message
          : cur.name
        : typeof cur === 'string'
          ? cur
          : safeJson(cur),
    );
  }
  return parts.join(': ');
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** stackFrames is the "at …" lines of an error's stack (without the message it starts with). */
function stackFrames(e: unknown): string | undefined {
  if (!(e instanceof Error) || e.stack === undefined) return undefined;
  const frames = e.stack
    .split('\n')
    .filter((l) => /^\s+at /.test(l))
    .map((l) => l.trim());
  return frames.length > 0 ? frames.join('\n') : undefined;
}

/**
 * toOutput maps a log call's fields to the output's: `err` (or pino's error key, `error`) becomes
 * `error` (text) and `stacktrace`; every other field is kept as given.
 */
function toOutput(obj: Record<string, unknown>): Record<string, unknown> {
  if (!('err' in obj) && !('error' in obj)) return obj;
  const { err, error, ...rest } = obj;
  const e = err ?? error;
  if (e === undefined) return rest;
  const stacktrace = stackFrames(e);
  return { ...rest, error: errorText(e), ...(stacktrace !== undefined ? { stacktrace } : {}) };
}

/**
 * createLogger returns the root logger writing JSON lines to stderr (stdout stays free for CLI
 * output), or to `destination` (for tests). Writes are synchronous: a line is out before the call
 * returns, so nothing is lost when the process is killed, and the agent compiled by Bun (whose
 * asynchronous writes to a file on fd 2 came out seconds late) logs as promptly as on Node; the
 * agent and the controller log a few lines per lock transition, not per request. `level` is one of {@link LOG_LEVELS} (default `info`);
 * `base` fields go on every line (e.g. `component`).
 */
export function createLogger(
  level: LevelWithSilent = 'info',
  base: Record<string, string> = {},
  destination: DestinationStream = pino.destination({ dest: 2, sync: true }),
): Logger {
  return pino(
    {
      level,
      base: { ...base },
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      errorKey: 'error',
      formatters: {
        level: (label) => ({ level: label }),
        log: toOutput,
      },
    },
    destination,
  );
}

/** silentLogger drops everything; for tests that do not look at logs. */
export const silentLogger: Logger = pino({ level: 'silent' });
