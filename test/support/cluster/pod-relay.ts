/**
 * pod-relay.ts — `node pod-relay.ts SOCKET`, run inside a pod sandbox's network namespace
 * (test/support/cluster/sandbox.ts starts it with nsenter): accepts connections on the unix
 * socket SOCKET (a path, so reachable from the host's network namespace), reads one line with a
 * port number, and pipes the rest of the connection to 127.0.0.1:PORT inside the pod. This is
 * how a host port reaches a container that listens on the pod's loopback (probes, tests calling
 * the agent's HTTP API): slirp4netns's hostfwd cannot, it forwards to the pod's tap address only.
 * Prints `ready` once listening; exits on SIGTERM.
 */
import { rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';

const path = process.argv[2];
if (path === undefined) throw new Error('usage: pod-relay.ts SOCKET');

const relay = (client: Socket): void => {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(10);
    if (nl < 0) {
      if (head.length > 16) client.destroy();
      return;
    }
    client.off('data', onData);
    client.pause();
    const port = Number(head.subarray(0, nl).toString('utf8'));
    const rest = head.subarray(nl + 1);
    if (!Number.isInteger(port) || port <= 0 || port > 65535) {
      client.destroy();
      return;
    }
    const upstream = connect(port, '127.0.0.1');
    upstream.once('connect', () => {
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  };
  client.on('data', onData);
  client.on('error', () => undefined);
};

rmSync(path, { force: true });
const server = createServer(relay);
server.listen(path, () => {
  process.stdout.write('ready\n');
});
process.on('SIGTERM', () => {
  server.close();
  rmSync(path, { force: true });
  process.exit(0);
});
