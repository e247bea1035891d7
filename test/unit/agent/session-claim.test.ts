/**
 * SessionClaim (src/agent/session-claim.ts): one session per lock per pod. Real sockets and, for
 * the crash, a real child process that holds a claim and is SIGKILLed.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimAddress, claimSession, SessionClaimedError } from '../../../src/agent/session-claim.ts';

const pod = (uid: string) => ({ name: 'web-0', uid });
let seq = 0;
/** fresh: claim options no other test (or run) uses. */
const fresh = (lock = 'db') => ({ namespace: `ns-${process.pid}-${seq++}`, lock, self: pod('uid-0') });

describe('claimSession', () => {
  it('refuses a second claim of the same lock in the same pod at once, naming the holder', async () => {
    const o = fresh();
    const first = await claimSession({ ...o, program: 'fencepost exec' });
    try {
      const second = claimSession({ ...o, program: 'acquire()' });
      await expect(second).rejects.toBeInstanceOf(SessionClaimedError);
      await expect(second).rejects.toMatchObject({
        lock: 'db',
        holder: { program: 'fencepost exec', pid: process.pid, since: first.holder.since },
      });
      await expect(second).rejects.toThrow(
        /^another session in this pod holds lock db \(fencepost exec, pid \d+, since .+\); a pod is one candidate/,
      );
    } finally {
      await first.release();
    }
  });

  it('is free again once released (release is idempotent)', async () => {
    const o = fresh();
    const first = await claimSession(o);
    await first.release();
    await first.release();
    const again = await claimSession(o);
    await again.release();
  });

  it.each([
    { name: 'another lock of the same pod', other: (o: ReturnType<typeof fresh>) => ({ ...o, lock: 'other' }) },
    {
      name: 'another incarnation of the pod (new UID)',
      other: (o: ReturnType<typeof fresh>) => ({ ...o, self: pod('uid-1') }),
    },
    {
      name: 'the same pod name in another namespace',
      other: (o: ReturnType<typeof fresh>) => ({ ...o, namespace: `${o.namespace}-b` }),
    },
  ])('does not conflict with $name', async ({ other }) => {
    const o = fresh();
    const a = await claimSession(o);
    const b = await claimSession(other(o));
    await Promise.all([a.release(), b.release()]);
  });

  it('is freed by the kernel when the process holding it is SIGKILLed', async () => {
    const o = fresh();
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { claimSession } from ${JSON.stringify(resolve(import.meta.dirname, '../../../src/agent/session-claim.ts'))};
         await claimSession(${JSON.stringify({ ...o, program: 'child' })});
         process.stdout.write('claimed\\n');
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise<void>((res, rej) => {
        child.stdout.on('data', (d: Buffer) => {
          if (d.toString().includes('claimed')) res();
        });
        child.on('exit', (code) => {
          rej(new Error(`child exited ${String(code)}`));
        });
      });
      await expect(claimSession(o)).rejects.toMatchObject({ holder: { program: 'child', pid: child.pid } });
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((res) => child.once('exit', res));
    const after = await claimSession(o);
    await after.release();
  });

  it('names a Linux abstract socket, a Windows pipe, or a socket file elsewhere, of bounded length', () => {
    const o = { namespace: 'n'.repeat(63), lock: 'l'.repeat(63), self: { name: 'p'.repeat(253), uid: 'u'.repeat(36) } };
    const linux = claimAddress(o, 'linux');
    expect(linux.startsWith('\0fencepost.io/session/')).toBe(true);
    expect(Buffer.byteLength(linux)).toBeLessThanOrEqual(107);
    expect(claimAddress(o, 'win32')).toMatch(/^\\\\\?\\pipe\\fencepost\.io-session-[0-9a-f]{40}$/);
    expect(claimAddress(o, 'darwin')).toMatch(/fencepost-session-[0-9a-f]{40}\.sock$/);
    expect(claimAddress({ ...o, lock: 'other' }, 'linux')).not.toBe(linux);
  });
});
