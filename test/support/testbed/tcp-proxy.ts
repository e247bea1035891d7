/**
 * A loopback TCP proxy for fault tests: put it between a client and a server (the controller and
 * redis-server) and make the network misbehave on command, without touching either process.
 *
 * - `holdReplies(match)`: from the first client→server chunk that `match` accepts (at once when no
 *   `match` is given), server→client bytes are held instead of forwarded. The request that
 *   matched still reaches the server, which executes it; the client never sees the reply. This is
 *   "the command ran but the answer was lost": a crash between a side effect and its record.
 * - `release()`: deliver what was held and forward normally again.
 * - `blackhole()`: forward nothing in either direction (buffered, as TCP would retransmit);
 *   `heal()` ends every fault and delivers what was buffered.
 * - `retarget(port)`: send new connections to another loopback port (a failover: the old server
 *   is gone or demoted); open connections stay where they are until they close.
 * - `close()`: stop listening and destroy every socket.
 *
 * Buffers are bounded: a connection whose held bytes exceed `maxBufferedBytes` is destroyed (as a
 * TCP connection eventually gives up). The proxy listens on 127.0.0.1 only and forwards to a
 * loopback target only.
 */
import { createConnection, createServer, type Socket } from 'node:net';

/** TcpProxy is a running proxy; `port` is where clients connect. */
export interface TcpProxy {
  readonly port: number;
  /** holding is true while server→client bytes are being held (holdReplies triggered, not released). */
  readonly holding: boolean;
  /**
   * holdReplies holds server→client bytes from now on, or — with `match` — from the first
   * client→server chunk for which `match(window)` is true. `window` is that chunk preceded by the
   * connection's most recent client bytes (at most 4 KiB in all), so a request split across TCP
   * segments still matches. The hold starts before the matching chunk is forwarded, so its reply
   * is always held.
   */
  holdReplies(match?: (window: Buffer) => boolean): void;
  /** release delivers the held bytes and forwards replies normally again (a pending match is disarmed). */
  release(): void;
  /** blackhole stops forwarding in both directions, on open and new connections alike. */
  blackhole(): void;
  /** heal ends holdReplies and blackhole, and delivers everything buffered. */
  heal(): void;
  /** onClientData observes every client→server chunk as it is forwarded; returns an unsubscribe. */
  onClientData(cb: (chunk: Buffer, connection: number) => void): () => void;
  /** openConnections is how many client connections are open now. */
  openConnections(): number;
  /** targetPort is where new connections are forwarded. */
  readonly targetPort: number;
  /**
   * retarget forwards new connections to `port` (same loopback host) from now on; open connections
   * keep their server (a client whose old server died reconnects and lands on the new one).
   */
  retarget(port: number): void;
  /** close stops listening and destroys every socket. */
  close(): Promise<void>;
}

export interface TcpProxyOptions {
  readonly targetPort: number;
  /** targetHost must be a loopback address (default 127.0.0.1). */
  readonly targetHost?: string;
  /** maxBufferedBytes bounds the bytes held per connection and direction (default 8 MiB). */
  readonly maxBufferedBytes?: number;
}

const WINDOW_BYTES = 4096;
const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

interface Pipe {
  readonly id: number;
  readonly client: Socket;
  readonly upstream: Socket;
  /** toClient: held server→client bytes; toServer: client→server bytes held by a blackhole. */
  readonly toClient: Buffer[];
  readonly toServer: Buffer[];
  toClientBytes: number;
  toServerBytes: number;
  /** upstreamEnded: the server closed its side while replies were held; end the client after the flush. */
  upstreamEnded: boolean;
  window: Buffer;
}

/** startTcpProxy listens on 127.0.0.1:0 and forwards each connection to the target. */
export async function startTcpProxy(opts: TcpProxyOptions): Promise<TcpProxy> {
  const host = opts.targetHost ?? '127.0.0.1';
  if (!LOOPBACK.has(host)) throw new Error(`tcp-proxy forwards to loopback only, not ${host}`);
  const maxBuffered = opts.maxBufferedBytes ?? 8 * 1024 * 1024;
  const pipes = new Map<number, Pipe>();
  const observers = new Set<(chunk: Buffer, connection: number) => void>();
  let nextId = 1;
  let holding = false;
  let armed: ((window: Buffer) => boolean) | undefined;
  let blackholed = false;
  let targetPort = opts.targetPort;

  const destroy = (p: Pipe): void => {
    pipes.delete(p.id);
    p.client.destroy();
    p.upstream.destroy();
  };
  /** forward writes to dest, pausing src until dest drains (bounded memory without faults). */
  const forward = (src: Socket, dest: Socket, chunk: Buffer): void => {
    if (dest.destroyed) return;
    if (!dest.write(chunk)) {
      src.pause();
      dest.once('drain', () => {
        src.resume();
      });
    }
  };
  const flush = (p: Pipe): void => {
    if (!blackholed) {
      for (const c of p.toServer.splice(0)) forward(p.client, p.upstream, c);
      p.toServerBytes = 0;
    }
    if (!blackholed && !holding) {
      for (const c of p.toClient.splice(0)) forward(p.upstream, p.client, c);
      p.toClientBytes = 0;
      if (p.upstreamEnded) p.client.end();
    }
  };

  const server = createServer({ allowHalfOpen: false }, (client) => {
    const id = nextId++;
    const upstream = createConnection({ host, port: targetPort });
    const p: Pipe = {
      id,
      client,
      upstream,
      toClient: [],
      toServer: [],
      toClientBytes: 0,
      toServerBytes: 0,
      upstreamEnded: false,
      window: Buffer.alloc(0),
    };
    pipes.set(id, p);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('error', () => {
      destroy(p);
    });
    upstream.on('error', () => {
      destroy(p);
    });
    client.on('close', () => {
      destroy(p);
    });
    upstream.on('close', () => {
      if (p.toClient.length === 0) {
        destroy(p);
        return;
      }
      p.upstreamEnded = true; // deliver the held replies first, on release
    });

    client.on('data', (chunk: Buffer) => {
      const joined = Buffer.concat([p.window, chunk]);
      p.window = joined.subarray(Math.max(0, joined.length - WINDOW_BYTES));
      // Decide before forwarding: the reply to this chunk must not slip through.
      if (armed !== undefined && armed(p.window)) {
        holding = true;
        armed = undefined;
      }
      for (const cb of observers) cb(chunk, id);
      if (blackholed) {
        p.toServer.push(chunk);
        p.toServerBytes += chunk.length;
        if (p.toServerBytes > maxBuffered) destroy(p);
        return;
      }
      forward(client, upstream, chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (holding || blackholed) {
        p.toClient.push(chunk);
        p.toClientBytes += chunk.length;
        if (p.toClientBytes > maxBuffered) destroy(p);
        return;
      }
      forward(upstream, client, chunk);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') {
    server.close();
    throw new Error('tcp-proxy got no port');
  }

  return {
    port: addr.port,
    get holding() {
      return holding;
    },
    holdReplies(match) {
      if (match === undefined) {
        holding = true;
        armed = undefined;
      } else {
        armed = match;
      }
    },
    release() {
      holding = false;
      armed = undefined;
      for (const p of [...pipes.values()]) flush(p);
    },
    blackhole() {
      blackholed = true;
    },
    heal() {
      holding = false;
      armed = undefined;
      blackholed = false;
      for (const p of [...pipes.values()]) flush(p);
    },
    onClientData(cb) {
      observers.add(cb);
      return () => {
        observers.delete(cb);
      };
    },
    openConnections: () => pipes.size,
    get targetPort() {
      return targetPort;
    },
    retarget(port) {
      if (!Number.isInteger(port) || port <= 0 || port > 65535)
        throw new Error(`tcp-proxy: invalid target port ${port}`);
      targetPort = port;
    },
    async close() {
      observers.clear();
      const closed = new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
      for (const p of [...pipes.values()]) destroy(p);
      await closed;
    },
  };
}
