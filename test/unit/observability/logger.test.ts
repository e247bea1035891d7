import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, errorText } from '../../../src/observability/logger.ts';

/** capture returns a destination collecting pino's output, and its lines parsed. */
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
