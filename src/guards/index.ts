/**
 * Fencing guards: make a resource refuse writes whose fencing token is below the highest it has
 * accepted — Redis (a Lua fenced write), HTTP (a mark book and a node:http middleware) and SQL
 * (statement text for a fence column).
 *
 * This is the `fencepost/guards` entry point of the package: it loads no Kubernetes client, no
 * Redis client (the Redis guard takes the caller's ioredis client; only its type is imported), no
 * logger and no metrics — a service that only guards a resource pays for nothing else
 * (test/unit/cli/entry-imports.test.ts measures it).
 */
export { MAX_TOKEN, parseToken, TokenError } from '../protocol/token.ts';
export { DEFAULT_WRITE_ID_TTL_MS, redisGuard } from './redis-guard.ts';
export type { RedisGuard, RedisGuardOptions, RedisWriteResult } from './redis-guard.ts';
export { FenceBook, defaultResource, fencingTokenOf, httpGuard } from './http-guard.ts';
export type { FenceBookOptions, FenceCheck, HttpGuardOptions, HttpMiddleware } from './http-guard.ts';
export {
  SqlIdentifierError,
  fencedParams,
  fencedUpdateSql,
  fencedUpsertSql,
  quoteIdentifier,
  tokenParam,
} from './sql-guard.ts';
export type { FencedSqlSpec } from './sql-guard.ts';
export {
  fenceMigrationSql,
  postgresGuard,
  type FenceMigrationSpec,
  type PostgresGuard,
  type PostgresQueryable,
  type PostgresWriteResult,
} from './postgres-guard.ts';
