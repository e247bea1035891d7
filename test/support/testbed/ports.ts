/** Free loopback ports for the testbed's servers. */
import { createServer } from 'node:net';

/**
 * freePort asks the kernel for a free port on 127.0.0.1 and releases it. Another process may
 * take it before we bind it again; callers that start a server retry on "address in use".
 */
export async function freePort(): Promise<number> {
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
