// parseMonitorLine (test/support/testbed/redis-monitor.ts): MONITOR's lines as redis-server writes
// them (sdscatrepr quoting), read back into the arguments the command was sent with.
import { describe, expect, it } from 'vitest';
import { parseMonitorLine } from '../../support/testbed/redis-monitor.ts';

describe('parseMonitorLine', () => {
  it('reads the time, database, source and each quoted argument', () => {
    expect(
      parseMonitorLine('1796650391.799571 [0 127.0.0.1:45968] "SET" "safety:t1:w:a" "{\\"token\\":\\"7\\"}"'),
    ).toEqual({
      time: '1796650391.799571',
      database: '0',
      source: '127.0.0.1:45968',
      args: ['SET', 'safety:t1:w:a', '{"token":"7"}'],
    });
  });

  it('undoes every escape redis writes, bytes as UTF-8', () => {
    const line = '1.5 [3 lua] "ECHO" "a\\\\b\\n\\r\\t\\x07\\b" "\\xc3\\xa9" ""';
    expect(parseMonitorLine(line)).toEqual({
      time: '1.5',
      database: '3',
      source: 'lua',
      args: ['ECHO', 'a\\b\n\r\t\x07\b', 'é', ''],
    });
  });

  it('is not a monitored command: undefined', () => {
    expect(parseMonitorLine('OK')).toBeUndefined();
    expect(parseMonitorLine('1.5 [0 lua] "unterminated')).toBeUndefined();
  });
});
