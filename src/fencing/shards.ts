/**
 * Shards: several Redis deployments for the controller's fencing counters, so that one Redis is
 * not every lock's bottleneck (one Redis caps the grants per second of every lock at once). Each counter key is placed on one shard by rendezvous
 * (highest-random-weight) hashing of the shard's identity and the key: stable while the shard set
 * is, and a change of the set moves only the keys of the shards added or removed (about 1/N of
 * them), never the others.
 *
 * A key that moves starts on its new shard from nothing, and that is safe: every grant's token
 * comes from FENCE_NEXT with the Lease's high-water mark as its floor, so the new shard's counter
 * is re-floored above every token issued on the old one (fencing/redis-fence.ts). Pure.
 */

/** ShardUrlError: a bad --redis-url list, naming the flag and the value. */
export class ShardUrlError extends Error {}

/**
 * parseShardUrls splits a --redis-url value (one URL, or several separated by commas) and checks
 * each; `what` names the flag for errors. Empty entries are refused, as are duplicates (the same
 * shard twice would get two connections and the same weight).
 */
export function parseShardUrls(value: string, what: string): string[] {
  const urls = value.split(',').map((u) => u.trim());
  const seen = new Set<string>();
  for (const u of urls) {
    if (!/^rediss?:\/\/[^,]+$/.test(u))
      throw new ShardUrlError(`${what}: each URL must start with redis:// or rediss://, got ${JSON.stringify(u)}`);
    const id = shardIdentity(u);
    if (seen.has(id)) throw new ShardUrlError(`${what}: shard ${id} is listed twice`);
    seen.add(id);
  }
  return urls;
}

/**
 * shardIdentity: what a shard is for placement — scheme, host, port and database, without the
 * credentials, so that rotating a password does not move every key.
 */
export function shardIdentity(url: string): string {
  const u = new URL(url);
  const db = u.pathname.replace(/^\/+/, '') || '0';
  return `${u.protocol}//${u.hostname}:${u.port || '6379'}/${db}`;
}

export { shardFor } from '../protocol/placement.ts';
