/**
 * Fencing guards: make a resource refuse writes whose fencing token is below the highest it has
 * accepted — Redis (a Lua fenced write), HTTP (a mark book and a node:http middleware) and SQL
 * (statement text, and a PostgreSQL guard). Each keeps one mark per lock by default, covering
 * every key, row or path written under that lock; one mark per key/row/resource is an explicit,
 * weaker option.
 *
 * This is the `fencepost/guards` entry point of the package: it loads no Kubernetes client, no
 * Redis client (the Redis guard takes the caller's ioredis client; only its type is imported), no
 * logger and no metrics — a service that only guards a resource pays for nothing else
 * (test/unit/cli/entry-imports.test.ts measures it).
 */
export { MAX_TOKEN, parseToken, TokenError } from '../protocol/token.ts';
export { DEFAULT_LOCK, DEFAULT_WRITE_ID_TTL_MS, RESERVED_KEY_PREFIX, redisGuard } from './redis-guard.ts';
export type { RedisGuard, RedisGuardOptions, RedisWriteResult } from './redis-guard.ts';
export {
  FenceBook,
  LOCK_MARK_PREFIX,
  defaultResource,
  fencingSignalOf,
  fencingTokenOf,
  httpGuard,
  normalizeResource,
} from './http-guard.ts';
export type { FenceBookOptions, FenceCheck, HttpGuardOptions, HttpMiddleware, NormalizeOptions } from './http-guard.ts';
export {
  DEFAULT_FENCE_TABLE,
  SqlIdentifierError,
  fenceTableSql,
  fencedDeleteSql,
  fencedParams,
  fencedUpdateSql,
  fencedUpsertSql,
  lockAdvanceSql,
  lockFencedDeleteSql,
  lockFencedParams,
  lockFencedUpdateSql,
  lockFencedUpsertSql,
  quoteIdentifier,
  tokenParam,
} from './sql-guard.ts';
export type { FenceTableSpec, FencedSqlSpec, LockFencedSqlSpec } from './sql-guard.ts';
export {
  fenceMigrationSql,
  postgresGuard,
  type FenceMigrationSpec,
  type PostgresGuard,
  type PostgresQueryable,
  type PostgresWriteResult,
} from './postgres-guard.ts';
