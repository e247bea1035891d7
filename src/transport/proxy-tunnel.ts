/**
 * proxy-tunnel.ts — the kubeconfig's `proxy-url` for the one API client (client.ts): an Agent class
 * whose connections are HTTP CONNECT tunnels through the proxy, as Go's http.Transport makes them.
 */
import type { Agent as HttpAgent } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

type AgentClass = typeof HttpAgent | typeof HttpsAgent;
type CreateCallback = (err: Error | null, socket?: Socket) => void;

/**
 * tunnelling makes an Agent class whose connections are HTTP CONNECT tunnels through `proxy` (the
 * kubeconfig's `proxy-url`), with TLS to the API server inside the tunnel when `tls`. A proxy's
 * `user:password@` is sent as Proxy-Authorization (basic), as Go's http.Transport sends it.
 */
export function tunnelling(Base: AgentClass, proxy: URL, tls: boolean): AgentClass {
  class Tunnelling extends (Base as typeof HttpsAgent) {
    override createConnection(
      options: ConnectionOptions & { host?: string | null; port?: number | string | null },
      callback?: (err: Error | null, stream: Duplex) => void,
    ): undefined {
      const cb: CreateCallback = (err, socket) => {
        // Node's agent reads only the error when there is one; the socket otherwise.
        if (socket !== undefined) callback?.(null, socket);
        else callback?.(err ?? new Error('proxy tunnel failed'), undefined as unknown as Duplex);
      };
      const host = options.host ?? 'localhost';
      const port = Number(options.port ?? (tls ? 443 : 80));
      openTunnel(proxy, host, port, (err, socket) => {
        if (err !== null || socket === undefined) {
          cb(err ?? new Error('proxy tunnel failed'));
          return;
        }
        if (!tls) {
          cb(null, socket);
          return;
        }
        const secure = tlsConnect({ ...options, socket });
        let settled = false;
        secure.once('secureConnect', () => {
          settled = true;
          cb(null, secure);
        });
        secure.once('error', (e: Error) => {
          if (!settled) cb(e);
        });
      });
      return undefined;
    }
  }
  return Tunnelling;
}

/** PROXY_HEAD_LIMIT bounds the proxy's answer to CONNECT (its status line and headers). */
const PROXY_HEAD_LIMIT = 16 * 1024;

/** openTunnel asks `proxy` to CONNECT to host:port and hands over the socket once it answers 200. */
function openTunnel(proxy: URL, host: string, port: number, cb: CreateCallback): void {
  const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const socket = netConnect({
    host: proxy.hostname.replace(/^\[|\]$/g, ''),
    port: proxy.port !== '' ? Number(proxy.port) : 80,
  });
  let done = false;
  const finish = (err: Error | null): void => {
    if (done) return;
    done = true;
    socket.off('data', onData);
    if (err !== null) {
      socket.destroy();
      cb(err);
    } else cb(null, socket);
  };
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > PROXY_HEAD_LIMIT)
        finish(new Error(`proxy ${proxy.host}: no end to its answer to CONNECT ${target}`));
      return;
    }
    const statusLine = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
    if (!/^HTTP\/1\.[01] 200( |$)/.test(statusLine)) {
      finish(new Error(`proxy ${proxy.host} refused CONNECT ${target}: ${statusLine}`));
      return;
    }
    // The server speaks only after the client (TLS hello, or the request): nothing follows the
    // proxy's answer yet, but should something, it is handed on, not lost.
    const rest = head.subarray(end + 4);
    if (rest.length > 0) socket.unshift(rest);
    finish(null);
  };
  socket.on('data', onData);
  socket.once('error', (err) => {
    finish(new Error(`proxy ${proxy.host}: ${err.message}`, { cause: err }));
  });
  socket.once('close', () => {
    finish(new Error(`proxy ${proxy.host} closed the connection before answering CONNECT ${target}`));
  });
  socket.once('connect', () => {
    const auth =
      proxy.username !== ''
        ? `Proxy-Authorization: Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}\r\n`
        : '';
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
  });
}
