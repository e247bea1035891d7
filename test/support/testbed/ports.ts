/** Free loopback ports for the testbed's servers. */
import { createServer } from 'node:net';

/** given: the ports freePort has handed out in this process. */
const given = new Set<number>();

/**
 * freePort asks the kernel for a free port on 127.0.0.1 and releases it; never one it handed out
 * before in this process, since the kernel may give a port just released to the next caller and
 * servers started in parallel would then share it. Another process may still take it before we
 * bind it: callers that start a server check that the server answering is theirs.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = await kernelPort();
    if (!given.has(port)) {
      given.add(port);
      return port;
    }
  }
  throw new Error('No loopback port this process has not used, in 100 tries');
}

/** kernelPort is a port the kernel gave a listener on 127.0.0.1, released again. */
async function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('No port assigned'));
        return;
      }
      srv.close(() => resolve(addr.port));
    });
  });
}
