import { describe, expect, it } from 'vitest';
import { bodyRefusal, browserRefusal, contentTypeRefusal, hostRefusal } from '../../../src/agent/local-only.ts';

const typeOf = (p: { type: string } | undefined): string | undefined => p?.type.replace(/^.*\//, '');

describe('the local API rules', () => {
  it.each([
    ['127.0.0.1:7370', undefined],
    ['127.0.0.1', undefined],
    ['127.8.9.10:1', undefined],
    ['localhost:7370', undefined],
    ['LOCALHOST', undefined],
    ['[::1]:7370', undefined],
    ['evil.example:7370', 'foreign-host'],
    ['127.0.0.1.evil.example', 'foreign-host'],
    ['localhost.evil.example:7370', 'foreign-host'],
    ['10.0.0.1:7370', 'foreign-host'],
    ['[::2]:7370', 'foreign-host'],
    ['', 'foreign-host'],
    [undefined, 'foreign-host'],
  ])('Host %s → %s', (host, want) => {
    expect(typeOf(hostRefusal(host === undefined ? {} : { host }, '127.0.0.1'))).toBe(want);
  });

  it('accepts the --listen host', () => {
    expect(hostRefusal({ host: '[::1]:7370' }, '::1')).toBeUndefined();
  });

  it.each([
    [{}, undefined],
    [{ 'sec-fetch-site': 'none' }, undefined],
    [{ origin: 'http://evil.example' }, 'origin'],
    [{ origin: 'null' }, 'origin'],
    [{ 'sec-fetch-site': 'cross-site' }, 'sec-fetch-site'],
    [{ 'sec-fetch-site': 'same-site' }, 'sec-fetch-site'],
    [{ 'sec-fetch-site': 'same-origin' }, 'sec-fetch-site'],
  ])('browser headers %j → rule %s', (headers, rule) => {
    expect(browserRefusal(headers)?.['rule']).toBe(rule);
  });

  it.each([
    ['application/json', undefined],
    ['application/json; charset=utf-8', undefined],
    ['Application/JSON', undefined],
    [undefined, 'json-body-required'],
    ['text/plain', 'json-body-required'],
    ['application/x-www-form-urlencoded', 'json-body-required'],
    ['multipart/form-data; boundary=x', 'json-body-required'],
    ['application/jsonx', 'json-body-required'],
  ])('Content-Type %s → %s', (type, want) => {
    expect(typeOf(contentTypeRefusal(type === undefined ? {} : { 'content-type': type }))).toBe(want);
  });

  it.each([
    ['{}', undefined],
    [' { } \n', undefined],
    ['', 'json-body-required'],
    ['[]', 'json-body-required'],
    ['null', 'json-body-required'],
    ['"x"', 'json-body-required'],
    ['wait=10s', 'json-body-required'],
    ['{"wait":"10s"}', 'invalid-parameter'],
  ])('body %j → %s', (body, want) => {
    expect(typeOf(bodyRefusal(body))).toBe(want);
  });
});
