/**
 * SessionClaim — one session per lock per pod, so that two sessions in one pod never hold one
 * grant.
 *
 * The controller grants a lock to a pod: the Lease names the pod incarnation (name and UID), the
 * holder label and the Mutex request are the pod's. Two sessions of one lock in one pod — two
 * overlapping `fencepost exec`s, a sidecar agent and `acquire()` in the application — would both
 * see their pod on the Lease, both confirm the grant and hold it with the same token at once, and
 * one's Mutex withdrawal would erase the other's request. So a session first claims the lock for
 * its pod, and a second claim is refused ({@link SessionClaimedError}) until the first session
 * ends.
 *
 * The claim is a listening Unix socket whose name is derived from (namespace, pod name, pod UID,
 * lock). On Linux it is an abstract socket: it lives in the network namespace, which every
 * container of a pod shares (native sidecars and init containers too), it needs no shared volume
 * and no write access to the filesystem, and the kernel frees it the moment its process dies — a
 * crashed or SIGKILLed session leaves nothing behind, a paused (SIGSTOPped) one keeps its claim. A
 * second session that finds the name taken connects to it and reads who holds the claim (program,
 * pid, start time), for the error message. On Windows the claim is a named pipe (also freed by
 * the kernel); elsewhere (macOS, for development against a cluster) a socket file in the temporary
 * directory, taken over when nothing listens on it any more.
 *
 * Assumptions and caveats:
 * - The claim is local to a network namespace (on Linux) or to a machine: two processes that use
 *   the same pod identity from different pods or machines are not seen (that identity is a lie).
 * - Sockets are opened close-on-exec: a command that `fencepost exec` started does not inherit the
 *   claim, so if exec itself is SIGKILLed, its command may run on while a new session claims the
 *   lock (see docs/agent.md, residual risks).
 */
import { createHash } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HolderRef } from '../protocol/holder.ts';

/** ClaimHolder describes the session that holds a claim, as it told a refused session. */
export interface ClaimHolder {
  /** program is what runs the session: `fencepost exec`, `fencepost agent`, `acquire()`. */
  readonly program: string;
  readonly pid: number;
  /** since is when the claim was taken (RFC 3339). */
  readonly since: string;
}

/** SessionClaimOptions names the claim and describes this session to a refused one. */
export interface SessionClaimOptions {
  readonly namespace: string;
  readonly lock: string;
  /** self is the pod incarnation the session runs for. */
  readonly self: HolderRef;
  /** program: what runs this session, shown to a refused session (default `acquire()`). */
  readonly program?: string;
}

/** SessionClaim is a held claim; release it when the session has ended (idempotent). */
export interface SessionClaim {
  readonly holder: ClaimHolder;
  release(): Promise<void>;
}

/**
 * SessionClaimedError: another session in this pod holds the lock's claim. `holder` is what that
 * session said about itself (undefined if it did not answer within a second, e.g. it is paused).
 */
export class SessionClaimedError extends Error {
  readonly lock: string;
  readonly holder: ClaimHolder | undefined;
  constructor(lock: string, holder: ClaimHolder | undefined) {
    super(
      `another session in this pod holds lock ${lock} (${
        holder !== undefined ? `${holder.program}, pid ${holder.pid}, since ${holder.since}` : 'it did not say who'
      }); a pod is one candidate, so it runs one session per lock at a time`,
    );
    this.name = 'SessionClaimedError';
    this.lock = lock;
    this.holder = holder;
  }
}

/** claimAddress is the socket address of a claim (the hash keeps it short and free of odd characters). */
export function claimAddress(
  o: Pick<SessionClaimOptions, 'namespace' | 'lock' | 'self'>,
  platform = process.platform,
): string {
  const key = createHash('sha256')
    .update([o.namespace, o.self.name, o.self.uid, o.lock].join('\n'))
    .digest('hex')
    .slice(0, 40);
  if (platform === 'linux') return `\0fencepost.io/session/${key}`;
  if (platform === 'win32') return `\\\\?\\pipe\\fencepost.io-session-${key}`;
  return join(tmpdir(), `fencepost-session-${key}.sock`);
}

/** ASK_TIMEOUT_MS bounds asking the holder of a claim who it is. */
const ASK_TIMEOUT_MS = 1000;

/**
 * claimSession takes the lock's claim for this pod, or throws {@link SessionClaimedError} at once
 * if another session holds it. The claim does not keep the process alive.
 */
export async function claimSession(o: SessionClaimOptions): Promise<SessionClaim> {
  const address = claimAddress(o);
  const holder: ClaimHolder = { program: o.program ?? 'acquire()', pid: process.pid, since: new Date().toISOString() };
  const answer = `${JSON.stringify(holder)}\n`;
  const fileBased = address.startsWith('/');
  for (let attempt = 0; ; attempt++) {
    const server = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.end(answer);
    });
    try {
      await listen(server, address);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      const other = await ask(address);
      // Nobody listens: the holder has just ended, or (a socket file) it crashed and left the
      // file behind, which is taken over. Either way, try once more.
      if (other === 'refused' && attempt === 0) {
        if (fileBased)
          try {
            unlinkSync(address);
          } catch {
            /* someone else took it over first */
          }
        continue;
      }
      throw new SessionClaimedError(o.lock, typeof other === 'object' ? other : undefined);
    }
    server.unref();
    let released: Promise<void> | undefined;
    return {
      holder,
      release: () =>
        (released ??= new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
        })),
    };
  }
}

function listen(server: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(err);
    };
    server.once('error', onError);
    server.listen(address, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** ask connects to a claim and reads who holds it; 'refused' when nothing listens, 'silent' when it does not answer. */
function ask(address: string): Promise<ClaimHolder | 'refused' | 'silent'> {
  return new Promise((resolve) => {
    let data = '';
    const socket = connect(address);
    const done = (r: ClaimHolder | 'refused' | 'silent'): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => {
      done('silent');
    }, ASK_TIMEOUT_MS);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
      if (data.includes('\n')) done(parseHolder(data) ?? 'silent');
    });
    socket.on('end', () => {
      done(parseHolder(data) ?? 'silent');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      done(err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? 'refused' : 'silent');
    });
  });
}

function parseHolder(text: string): ClaimHolder | undefined {
  try {
    const v = JSON.parse(text.trim()) as Partial<ClaimHolder>;
    if (typeof v.program === 'string' && typeof v.pid === 'number' && typeof v.since === 'string')
      return { program: v.program, pid: v.pid, since: v.since };
  } catch {
    /* not an answer we understand */
  }
  return undefined;
}
