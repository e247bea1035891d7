/**
 * The `--log-level` flag of every subcommand: controller-runtime's (zap's) level names, plus
 * `silent`, which turns logging off (tests and benchmarks use it).
 */
import { UsageError } from './usage-error.ts';

/** LOG_LEVELS lists the accepted values, most verbose first. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
/** LogLevel is one of LOG_LEVELS; every one is also a pino level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** parseLogLevel returns `text` as a LogLevel; throws a UsageError naming `flag` otherwise. */
export function parseLogLevel(text: string, flag = '--log-level'): LogLevel {
  const level = LOG_LEVELS.find((l) => l === text);
  if (level === undefined)
    throw new UsageError(flag, `must be debug, info, warn or error (or silent), got ${JSON.stringify(text)}`);
  return level;
}
