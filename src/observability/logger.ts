/**
 * JSON logs in the shape log pipelines built for controller-runtime operators already read: one JSON object per line with `ts` (RFC 3339, UTC), `level` as a word (`debug`, `info`,
 * `warn`, `error`), `msg`, and for a failure `error` (the error's message, with its causes after
 * `: `) plus `stacktrace` (its stack frames). Reconcile logs add controller-runtime's keys
 * (`controller`, `controllerGroup`, `controllerKind`, `namespace`, `name`, `reconcileID`; see
 * runtime/controller's ReconcileLogFields).
 *
 * Call sites use constant, capitalised, past-tense messages ("Granted Lease"),
 * variable parts in fields, errors as `log.x({ err }, msg)` (or `log.x(err, msg)`); the mapping
 * of `err` to `error` happens here, at output.
 */
import { writeSync } from 'node:fs';

/**
 * LOG_LEVELS are the levels `createLogger` accepts, least to most severe, then `silent`; the same
 * words appear in the output's `level` field.
 */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;

/** LevelWithSilent is one of {@link LOG_LEVELS}. */
export type LevelWithSilent = (typeof LOG_LEVELS)[number];

/**
 * LogFn logs one line: fields then a constant message, a bare message, or an error then a message
 * (pino's calling convention, so a pino logger can be handed in wherever a Logger is asked for).
 */
export interface LogFn {
  (obj: object, msg?: string): void;
  (msg: string): void;
}

/** Logger is what the code logs through: one method per level and child loggers with fixed fields. */
export interface Logger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  /** child returns a logger that adds `bindings` to every line, after its parent's. */
  child(bindings: Record<string, unknown>): Logger;
}

/** DestinationStream is where the lines go: anything with a write of one string (a Writable fits). */
export interface DestinationStream {
  write(line: string): unknown;
}

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
 * toOutput maps a log call's fields to the output's: `err` (or `error`) becomes `error` (text) and
 * `stacktrace`; every other field is kept as given.
 */
function toOutput(obj: Record<string, unknown>): Record<string, unknown> {
  if (!('err' in obj) && !('error' in obj)) return obj;
  const { err, error, ...rest } = obj;
  const e = err ?? error;
  if (e === undefined) return rest;
  const stacktrace = stackFrames(e);
  return { ...rest, error: errorText(e), ...(stacktrace !== undefined ? { stacktrace } : {}) };
}

/** SEVERITY orders the levels; a logger writes a call whose level is at least its own. */
const SEVERITY: Readonly<Record<LevelWithSilent, number>> = {
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  silent: Infinity,
};

/**
 * jsonValue renders one field's value as JSON, or undefined to leave the field out (undefined, a
 * function, a symbol). Never throws: a value JSON.stringify refuses (a cycle, a bigint) is written
 * with `[Circular]` in place of the repeated object and the bigint as a string.
 */
function jsonValue(v: unknown): string | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  try {
    return JSON.stringify(v);
  } catch {
    const seen = new WeakSet<object>();
    return JSON.stringify(v, (_key, x: unknown) => {
      if (typeof x === 'bigint') return x.toString();
      if (typeof x === 'object' && x !== null) {
        if (seen.has(x)) return '[Circular]';
        seen.add(x);
      }
      return x;
    });
  }
}

/** fieldsJson renders an object's own fields as `,"key":value` pairs, in their order. */
function fieldsJson(obj: Record<string, unknown>): string {
  let out = '';
  for (const key of Object.keys(obj)) {
    const value = jsonValue(obj[key]);
    if (value !== undefined) out += `,${JSON.stringify(key)}:${value}`;
  }
  return out;
}

/**
 * A JsonLogger writes a line as `{"level":…,"ts":…` then the logger's fixed fields (the root's
 * `base`, then each child's bindings), the call's fields, and `"msg"` last; a field given twice is
 * written twice, and a JSON reader keeps the last (the call's). That is the shape and order pino
 * wrote with the options this module used to give it, byte for byte
 * (test/unit/observability/logger.test.ts compares the two); the agent no longer loads pino and
 * its helpers, which cost each sidecar memory for features nobody here uses.
 */
class JsonLogger implements Logger {
  readonly #min: number;
  readonly #fixed: string;
  readonly #out: DestinationStream;

  constructor(min: number, fixed: string, out: DestinationStream) {
    this.#min = min;
    this.#fixed = fixed;
    this.#out = out;
  }

  readonly debug: LogFn = (a: object | string, msg?: string) => {
    this.#write('debug', a, msg);
  };
  readonly info: LogFn = (a: object | string, msg?: string) => {
    this.#write('info', a, msg);
  };
  readonly warn: LogFn = (a: object | string, msg?: string) => {
    this.#write('warn', a, msg);
  };
  readonly error: LogFn = (a: object | string, msg?: string) => {
    this.#write('error', a, msg);
  };

  child(bindings: Record<string, unknown>): Logger {
    return new JsonLogger(this.#min, this.#fixed + fieldsJson(bindings), this.#out);
  }

  #write(level: Exclude<LevelWithSilent, 'silent'>, a: object | string, given: string | undefined): void {
    if (SEVERITY[level] < this.#min) return;
    let fields: Record<string, unknown>;
    let msg: unknown = given;
    if (typeof a === 'string') {
      fields = {};
      msg = a;
    } else if (a instanceof Error) {
      // A bare error stands for { error }, and says its own message when the call gives none.
      fields = { error: a };
      msg ??= a.message;
    } else {
      fields = a as Record<string, unknown>;
      const e = fields['error'];
      if (msg === undefined && fields['msg'] === undefined && e !== undefined && e !== null && e !== '') {
        msg = (e as { message?: unknown }).message;
      }
    }
    const tail = msg === undefined ? '' : `,"msg":${jsonValue(msg) ?? '""'}`;
    const line = `{"level":"${level}","ts":"${new Date().toISOString()}"${this.#fixed}${fieldsJson(toOutput(fields))}${tail}}\n`;
    this.#out.write(line);
  }
}

/**
 * STDERR writes each line to fd 2 before returning: nothing is lost when the process is killed,
 * and the agent compiled by Bun (whose asynchronous writes to a file on fd 2 came out seconds
 * late) logs as promptly as on Node. A pipe that is full (EAGAIN) is waited on a millisecond at a
 * time; a closed one (EPIPE) drops the line rather than fail the caller.
 */
const STDERR: DestinationStream = {
  write(line: string): void {
    let buf = Buffer.from(line);
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(2, buf));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
      }
    }
  },
};

/**
 * createLogger returns the root logger writing JSON lines to stderr (stdout stays free for CLI
 * output), or to `destination` (for tests). Writes are synchronous (see STDERR); the agent and the
 * controller log a few lines per lock transition, not per request. `level` is one of
 * {@link LOG_LEVELS} (default `info`); `base` fields go on every line (e.g. `component`).
 */
export function createLogger(
  level: LevelWithSilent = 'info',
  base: Record<string, string> = {},
  destination: DestinationStream = STDERR,
): Logger {
  return new JsonLogger(SEVERITY[level], fieldsJson(base), destination);
}

/** silentLogger drops everything; for tests that do not look at logs. */
export const silentLogger: Logger = createLogger('silent');
