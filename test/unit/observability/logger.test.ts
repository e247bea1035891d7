import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLogger, errorText, type Logger } from '../../../src/observability/logger.ts';

// A pino logger can still be handed in wherever a Logger is asked for (acquire()'s `log`).
const pinoFits: Logger = pino({ level: 'silent' });
void pinoFits;

/** capture returns a destination collecting the logger's output, and its lines parsed. */
function capture(): { stream: Writable; lines: () => Record<string, unknown>[]; raw: () => string } {
  let out = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out += chunk.toString();
      cb();
    },
  });
  return {
    stream,
    raw: () => out,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('createLogger output', () => {
  it('writes one JSON object per line with ts, a level word, msg and the fields', () => {
    const c = capture();
    const log = createLogger('debug', { component: 'controller' }, c.stream);
    log.debug({ pod: 'web-0' }, 'Labelled holder Pod');
    log.info('Started controller process');
    log.warn('Warned');
    log.error('Failed');
    const lines = c.lines();
    expect(lines.map((l) => l['level'])).toEqual(['debug', 'info', 'warn', 'error']);
    expect(lines[0]).toEqual({
      level: 'debug',
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown,
      component: 'controller',
      pod: 'web-0',
      msg: 'Labelled holder Pod',
    });
    expect(c.raw().split('\n')).toHaveLength(5); // four lines and the final newline
  });

  it('accepts warn as a level: debug and info are dropped', () => {
    const c = capture();
    const log = createLogger('warn', {}, c.stream);
    log.debug('a');
    log.info('b');
    log.warn('c');
    log.error('d');
    expect(c.lines().map((l) => l['msg'])).toEqual(['c', 'd']);
  });

  it('maps { err } and a bare error to `error` text (with causes) and `stacktrace` frames, never `err`', () => {
    const c = capture();
    const log = createLogger('info', {}, c.stream);
    log.error(
      { err: new Error('Failed to replace Lease', { cause: new Error('409 Conflict\nbody') }), lock: 'a/b' },
      'Reconcile failed',
    );
    log.error(new TypeError('boom'), 'Crashed');
    log.info({ err: 'just a string' }, 'Skipped');
    const [first, second, third] = c.lines();
    expect(first).toMatchObject({
      level: 'error',
      error: 'Failed to replace Lease: 409 Conflict\nbody',
      lock: 'a/b',
      msg: 'Reconcile failed',
    });
    expect(first?.['stacktrace']).toMatch(/^at .*logger\.test\.ts/);
    expect(second).toMatchObject({ error: 'boom', msg: 'Crashed' });
    expect(third).toMatchObject({ error: 'just a string' });
    for (const l of c.lines()) {
      expect(l).not.toHaveProperty('err');
      expect(l).not.toHaveProperty('time');
    }
    expect(c.raw().trimEnd().split('\n')).toHaveLength(3); // a newline in a message stays inside its line
  });

  it("keeps a child logger's reconcile fields on every line", () => {
    const c = capture();
    const fields = {
      controller: 'distributedlock',
      controllerGroup: 'fencepost.io',
      controllerKind: 'DistributedLock',
      namespace: 'shop',
      name: 'db',
      reconcileID: 'r-1',
    };
    createLogger('info', {}, c.stream).child(fields).info({ holder: 'web-0' }, 'Granted Lease');
    expect(c.lines()[0]).toMatchObject({ ...fields, holder: 'web-0', msg: 'Granted Lease' });
  });
});

describe('errorText', () => {
  it.each([
    { name: 'a message', e: new Error('x'), want: 'x' },
    {
      name: 'the cause chain',
      e: new Error('a', { cause: new Error('b', { cause: new Error('c') }) }),
      want: 'a: b: c',
    },
    { name: 'a non-Error cause', e: new Error('a', { cause: { code: 7 } }), want: 'a: {"code":7}' },
    { name: 'an empty message by its name', e: new RangeError(), want: 'RangeError' },
    { name: 'a string', e: 'plain', want: 'plain' },
  ])('renders $name', ({ e, want }) => {
    expect(errorText(e)).toBe(want);
  });

  it('stops at a cause cycle', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(errorText(a)).toBe('a: b');
  });
});

/**
 * pinoAsBefore is pino with the options createLogger gave it before it wrote its lines itself: the
 * oracle for the format, which must not change under the log pipelines that read it.
 */
function pinoAsBefore(level: string, base: Record<string, string>, stream: Writable): Logger {
  const toOutput = (obj: Record<string, unknown>): Record<string, unknown> => {
    if (!('err' in obj) && !('error' in obj)) return obj;
    const { err, error, ...rest } = obj;
    const e = err ?? error;
    if (e === undefined) return rest;
    const frames =
      e instanceof Error && e.stack !== undefined ? e.stack.split('\n').filter((l) => /^\s+at /.test(l)) : [];
    return {
      ...rest,
      error: errorText(e),
      ...(frames.length > 0 ? { stacktrace: frames.map((l) => l.trim()).join('\n') } : {}),
    };
  };
  return pino(
    {
      level,
      base: { ...base },
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      errorKey: 'error',
      formatters: { level: (label) => ({ level: label }), log: toOutput },
    },
    stream,
  );
}

describe('the line format is the one pino wrote, byte for byte', () => {
  it.each(['debug', 'warn', 'silent'] as const)('at level %s, for every kind of call the code makes', (level) => {
    const ours = capture();
    const theirs = capture();
    const cause = new Error('409 Conflict', { cause: { code: 7 } });
    const err = new Error('Failed to replace Lease', { cause });
    const [boom, bare] = [new TypeError('boom'), new RangeError('no message given')]; // one stack for both loggers
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic['self'] = { back: cyclic, n: 2 };
    const calls = (log: Logger): void => {
      log.info('Started controller process');
      log.debug({ pod: 'web-0', n: 3, ok: true, none: null, gone: undefined }, 'Labelled holder Pod');
      log.warn({ list: [1, 'two'], nested: { a: { b: 'c"\n' } }, inf: Infinity, nan: NaN, f: () => 1 }, 'Warned');
      log.error({ err, lock: 'a/b' }, 'Reconcile failed');
      log.error({ error: err }, 'With error key');
      log.error({ error: err });
      log.error({ err });
      log.error(boom, 'Crashed');
      log.error(bare);
      log.info({ err: 'just a string' }, 'Skipped');
      log.info({ error: 'a string error' });
      log.info({ msg: 'a field named msg' });
      log.info({ msg: 'a field named msg' }, 'and a message');
      log.info({ component: 'override' }, 'Same key as a base field');
      log.info({}, 'ünïcödé ✓ and "quotes" and a\ttab');
      log.info({ date: new Date(0), big: { toJSON: () => 'custom' } }, 'toJSON');
      log.warn({ cyclic }, 'A cycle');
      const child = log.child({ controller: 'distributedlock', namespace: 'shop', reconcileID: 'r-1' });
      child.info({ holder: 'web-0' }, 'Granted Lease');
      child.child({ component: 'informer', skipped: undefined }).debug({ kind: 'Pod' }, 'Synced');
    };
    calls(createLogger(level, { component: 'controller', pod: 'web-0' }, ours.stream));
    calls(pinoAsBefore(level, { component: 'controller', pod: 'web-0' }, theirs.stream));
    const sameTs = (raw: string): string => raw.replaceAll(/"ts":"[^"]+"/g, '"ts":"T"');
    // The cycle is the one field both render without JSON.stringify, each its own way: compared apart.
    const [oursRaw, theirsRaw] = [ours.raw(), theirs.raw()].map(sameTs);
    const withoutCycle = (raw: string): string[] => raw.split('\n').filter((l) => !l.includes('A cycle'));
    expect(withoutCycle(oursRaw ?? '')).toEqual(withoutCycle(theirsRaw ?? ''));
    if (level !== 'silent') {
      expect(oursRaw?.split('\n').length).toBe(level === 'debug' ? 20 : 9); // every line (debug: all 19 calls; warn: 8), then the final newline
      const line = oursRaw?.split('\n').find((l) => l.includes('A cycle')) ?? '';
      expect(JSON.parse(line)).toMatchObject({ cyclic: { a: 1, self: { back: '[Circular]', n: 2 } } });
    } else {
      expect(oursRaw).toBe('');
    }
  });
});
