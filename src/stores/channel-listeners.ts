/**
 * ChannelListeners: many listeners over one subscriber connection — the first listener of a
 * channel subscribes it, the last one gone unsubscribes it, and a message goes to every listener
 * of its channel. The bookkeeping the ioredis stores (redis/backend.ts ReleaseChannels) and the
 * Bun client (bun/client.ts) share; the connection is theirs.
 */
export class ChannelListeners {
  readonly #subscribe: (channel: string) => Promise<void>;
  readonly #unsubscribe: (channel: string) => Promise<void>;
  readonly #listeners = new Map<string, Set<(message: string) => void>>();

  constructor(subscribe: (channel: string) => Promise<void>, unsubscribe: (channel: string) => Promise<void>) {
    this.#subscribe = subscribe;
    this.#unsubscribe = unsubscribe;
  }

  /** deliver hands a message of `channel` to its listeners (called by the connection's message handler). */
  deliver(channel: string, message: string): void {
    for (const fn of [...(this.#listeners.get(channel) ?? [])]) fn(message);
  }

  /** listen calls `fn` on every message on `channel`; resolves once subscribed; returns the unsubscribe. */
  async listen(channel: string, fn: (message: string) => void): Promise<() => void> {
    let set = this.#listeners.get(channel);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(channel, set);
      try {
        await this.#subscribe(channel);
      } catch (err) {
        this.#listeners.delete(channel);
        throw err;
      }
    }
    set.add(fn);
    const own = set;
    return () => {
      own.delete(fn);
      if (own.size === 0 && this.#listeners.get(channel) === own) {
        this.#listeners.delete(channel);
        this.#unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  clear(): void {
    this.#listeners.clear();
  }
}
