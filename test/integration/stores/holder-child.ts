/**
 * A store-lock holder in a process of its own, for tests that pause it (SIGSTOP): `node
 * holder-child.ts <store-url> <lock> <ttl-ms>` acquires the lock through the library, prints
 * `granted <token>`, and when the lock's signal aborts prints `lost <isHeld> <reason>`, releases
 * and exits 0.
 */
import { acquire } from '../../../src/index.ts';

const [url = '', lock = '', ttl = ''] = process.argv.slice(2);
const held = await acquire(lock, { store: url, ttlMs: Number(ttl) });
process.stdout.write(`granted ${held.token}\n`);
held.signal.addEventListener('abort', () => {
  const reason: unknown = held.signal.reason;
  process.stdout.write(`lost ${held.isHeld()} ${reason instanceof Error ? reason.message : String(reason)}\n`);
  void held.release().finally(() => process.exit(0));
});
