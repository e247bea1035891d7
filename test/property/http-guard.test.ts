/**
 * Forged and malformed tokens at the HTTP guard, in process: generated tokens and request
 * interleavings against the real `FenceBook` (its critical section, check and commit) and the real
 * `httpGuard` middleware on a loopback node:http server, compared with the BigInt model of
 * test/property/guard-model.ts.
 *
 * Properties:
 * - any batch of concurrent fenced writes to one resource has exactly the outcomes of the model
 *   run in arrival order (the FIFO critical section serialises check, write and commit): applied
 *   exactly when token >= mark; a malformed token is a 400 naming the value, a stale one a 409
 *   naming the mark; a refused write or one whose handler fails never moves the mark;
 * - the same over HTTP through the middleware (header values HTTP can carry), with one mark per
 *   lock (the default scope) whichever path each request writes;
 * - normalizeResource is idempotent, and percent-encoding any character of a path other than
 *   `/ \ ? # %`, adding a trailing slash or doubling a slash names the same resource.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FenceBook, httpGuard, normalizeResource, type HttpMiddleware } from '../../src/guards/http-guard.ts';
import { applyToModel, emptyLock, type Expected } from './guard-model.ts';
import { banner, fcParams, runs } from './settings.ts';
import { malformedToken, namesValue, validToken, type Malformed } from './tokens.ts';

const BOOK_RUNS = 3100;
const MIDDLEWARE_RUNS = 300;

/** HttpWrite is one request: its token (valid or malformed) and whether the handler's write fails. */
interface HttpWrite {
  readonly token: { readonly ok: true; readonly value: bigint } | { readonly ok: false; readonly bad: Malformed };
  readonly fails: boolean;
}

const tokenOf = (onlyHeaderSafe: boolean): fc.Arbitrary<HttpWrite['token']> =>
  fc.oneof(
    { arbitrary: fc.bigInt({ min: 0n, max: 12n }).map((value) => ({ ok: true as const, value })), weight: 6 },
    { arbitrary: validToken.map((value) => ({ ok: true as const, value })), weight: 3 },
    {
      // HTTP trims a header value's surrounding whitespace and refuses control characters: over
      // the wire only the values it can carry unchanged are meaningful.
      arbitrary: (onlyHeaderSafe
        ? malformedToken.filter(
            (b) => typeof b.value === 'string' && /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(b.value),
          )
        : malformedToken.filter((b) => typeof b.value === 'string')
      ).map((bad) => ({ ok: false as const, bad })),
      weight: 1,
    },
  );
const writes = (onlyHeaderSafe: boolean): fc.Arbitrary<HttpWrite[]> =>
  fc.array(fc.record({ token: tokenOf(onlyHeaderSafe), fails: fc.integer({ min: 0, max: 5 }).map((r) => r === 0) }), {
    minLength: 1,
    maxLength: 14,
  });

const text = (t: HttpWrite['token']): string => (t.ok ? t.value.toString() : String(t.bad.value));

describe('the HTTP guard against generated tokens (in process)', () => {
  beforeAll(() => {
    console.info(banner('http guard properties', runs(BOOK_RUNS) + runs(MIDDLEWARE_RUNS)));
  });

  it('FenceBook: concurrent writes to one resource have the model outcomes in arrival order; refusals never move the mark', async () => {
    await fc.assert(
      fc.asyncProperty(writes(false), fc.option(validToken, { nil: undefined }), async (batch, initial) => {
        const book = new FenceBook(initial === undefined ? {} : { initial: [['/r', initial]] });
        const model = emptyLock();
        model.mark = initial;
        const applied: string[] = [];
        // All requests arrive at once; each write yields before finishing, so without the critical
        // section they would interleave.
        const results = await Promise.allSettled(
          batch.map((w, i) =>
            book.guarded('/r', text(w.token), async (token) => {
              await new Promise((r) => setImmediate(r));
              if (w.fails) throw new Error(`write ${i} failed`);
              applied.push(`${i}:${token}`);
              return i;
            }),
          ),
        );
        const expectedApplied: string[] = [];
        for (const [i, w] of batch.entries()) {
          const markBefore = model.mark;
          const r = results[i];
          if (r === undefined) throw new Error('missing result');
          if (!w.token.ok) {
            expect(applyToModel(model, undefined, '', undefined, false)).toBe('malformed');
            expect(r.status === 'fulfilled' && !r.value.ok && r.value.status === 400).toBe(true);
            if (r.status === 'fulfilled' && !r.value.ok)
              expect(namesValue(r.value.reason, w.token.bad.value), r.value.reason).toBe(true);
            continue;
          }
          const token = w.token.value;
          if (markBefore !== undefined && token < markBefore) {
            expect(
              r.status === 'fulfilled' && !r.value.ok && r.value.status === 409 ? r.value.highWater : undefined,
              `write ${i}`,
            ).toBe(markBefore);
            continue;
          }
          if (w.fails) {
            expect(r.status, `write ${i} whose handler failed`).toBe('rejected');
            continue; // no commit: the model's mark stays
          }
          const e: Expected = applyToModel(model, token, `v${i}`, undefined, false);
          expect(e).toBe('applied');
          expect(r.status === 'fulfilled' && r.value.ok).toBe(true);
          expectedApplied.push(`${i}:${token}`);
        }
        expect(applied).toEqual(expectedApplied);
        expect(book.highWater('/r')).toBe(model.mark);
      }),
      fcParams(BOOK_RUNS),
    );
  });

  describe('httpGuard middleware over loopback HTTP', () => {
    let server: Server;
    let base: string;
    // One book for the server; each run uses a fresh resource.
    const book = new FenceBook();
    // One lock per run (the x-lock header), one mark per lock: the default scope.
    const guards = new Map<string, HttpMiddleware>();
    beforeAll(async () => {
      server = createServer((req, res) => {
        const lock = String(req.headers['x-lock']);
        let guard = guards.get(lock);
        if (guard === undefined) {
          guard = httpGuard(book, { lock });
          guards.set(lock, guard);
        }
        guard(req, res, () => {
          // The handler fails (500, no commit) when asked to.
          res.statusCode = req.headers['x-fail'] === '1' ? 500 : 200;
          res.end('done');
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });

    it('answers 200/400/409 exactly as the model says, one lock per run whatever the path, and commits only successes', async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(writes(true), async (batch) => {
          const lock = `run-${++n}`;
          const model = emptyLock();
          for (const [i, w] of batch.entries()) {
            const markBefore = model.mark;
            const res = await fetch(`${base}/doc/${i % 3}`, {
              method: 'PUT',
              headers: { 'fencing-token': text(w.token), 'x-fail': w.fails ? '1' : '0', 'x-lock': lock },
            });
            const body = await res.text();
            if (!w.token.ok) {
              expect(res.status, body).toBe(400);
              expect(namesValue((JSON.parse(body) as { error: string }).error, w.token.bad.value), body).toBe(true);
            } else if (markBefore !== undefined && w.token.value < markBefore) {
              expect(res.status, body).toBe(409);
              expect((JSON.parse(body) as { highWater: string }).highWater).toBe(markBefore.toString());
            } else if (w.fails) {
              expect(res.status).toBe(500);
            } else {
              expect(res.status, `write ${i}: ${body}`).toBe(200);
              applyToModel(model, w.token.value, '', undefined, false);
            }
            expect(book.highWater(`fencepost:lock:${lock}`)).toBe(model.mark);
          }
        }),
        fcParams(MIDDLEWARE_RUNS),
      );
    });
  });

  it('normalizeResource: idempotent, and blind to percent-encoding, trailing and doubled slashes', () => {
    const segment = fc.string({
      unit: fc.constantFrom(..."aZ09-._~!$&'()*+,;=:@é[] ".split('')),
      minLength: 1,
      maxLength: 6,
    });
    const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((xs) => `/${xs.join('/')}`);
    const encodeSome = (p: string, mask: readonly boolean[]): string =>
      [...p]
        .map((ch, i) =>
          ch !== '/' && mask[i % mask.length] === true
            ? [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')
            : ch,
        )
        .join('');
    fc.assert(
      fc.property(path, fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), fc.boolean(), (p, mask, slash) => {
        const name = normalizeResource(p);
        expect(normalizeResource(name)).toBe(name);
        const alias = encodeSome(p, mask).replace('/', slash ? '//' : '/') + (slash ? '/' : '');
        expect(normalizeResource(alias), alias).toBe(name);
      }),
      fcParams(2000),
    );
  });
});
