/** The race page's actions and who may send them; the web mode's flags. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_PAUSE_SECONDS, DEFAULT_RACE_ADDRESS, raceOptions } from '../../../hack/race/options.ts';
import { isJson, parseAction, sameOrigin } from '../../../hack/race/requests.ts';

describe('sameOrigin', () => {
  it.each([
    ['http://127.0.0.1:8301', '127.0.0.1:8301', true],
    ['http://localhost:8301', 'localhost:8301', true],
    ['http://attacker.example', '127.0.0.1:8301', false],
    ['http://127.0.0.1:9999', '127.0.0.1:8301', false],
    ['null', '127.0.0.1:8301', false],
    [undefined, '127.0.0.1:8301', false],
  ])('origin %s for host %s: %s', (origin, host, ok) => {
    expect(sameOrigin(origin, host)).toBe(ok);
  });
});

describe('isJson', () => {
  it.each([
    ['application/json', true],
    ['application/json; charset=utf-8', true],
    ['text/plain', false],
    ['application/x-www-form-urlencoded', false],
    [undefined, false],
  ])('%s: %s', (type, ok) => {
    expect(isJson(type)).toBe(ok);
  });
});

describe('parseAction', () => {
  it.each([
    ['/api/race', '', { type: 'race' }],
    ['/api/thaw', '{}', { type: 'thaw' }],
    ['/api/guard', '{"on":false}', { type: 'guard', on: false }],
    ['/api/freeze', '{"seconds":15}', { type: 'freeze', seconds: 15 }],
    ['/api/guard', '{"on":"yes"}', { error: 'Send {"on": true|false}.' }],
    ['/api/freeze', '{"seconds":"15"}', { error: 'Send {"seconds": N}.' }],
    ['/api/freeze', '{', { error: 'The body is not JSON.' }],
    ['/api/delete-everything', '{}', undefined],
  ])('%s %s', (path, body, want) => {
    expect(parseAction(path, body)).toEqual(want);
  });
});

describe('raceOptions', () => {
  it('defaults to loopback and a 15 s pause', () => {
    expect(
      raceOptions({ address: DEFAULT_RACE_ADDRESS, pause: String(DEFAULT_PAUSE_SECONDS), allowRemote: false }),
    ).toEqual({
      address: { host: '127.0.0.1', port: 8301 },
      pauseSeconds: 15,
    });
  });

  it('refuses a non-loopback address unless allowed', () => {
    expect(() => raceOptions({ address: '0.0.0.0:8301', pause: '15', allowRemote: false })).toThrow(/^--address: /);
    expect(raceOptions({ address: '0.0.0.0:8301', pause: '15', allowRemote: true }).address.host).toBe('0.0.0.0');
  });

  it.each(['0', '121', 'soon', ''])('refuses the pause %j', (pause) => {
    expect(() => raceOptions({ address: DEFAULT_RACE_ADDRESS, pause, allowRemote: false })).toThrow(/^--pause: /);
  });
});
