/**
 * JSON logs with pino. Messages are constant, capitalised, past tense ("Granted Lease"); the
 * variable parts go in fields; errors go in `err`. One child logger per reconcile carries the
 * controller, the lock key and a reconcile id.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/** createLogger returns the root logger writing JSON lines to stderr (stdout stays free for CLI output). */
export function createLogger(level: LevelWithSilent = 'info', base: Record<string, string> = {}): Logger {
  return pino({ level, base: { ...base }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(2));
}

/** silentLogger drops everything; for tests that do not look at logs. */
export const silentLogger: Logger = pino({ level: 'silent' });
