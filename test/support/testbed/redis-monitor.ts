/**
 * openMonitor — a redis-server's MONITOR stream, read on a socket of its own: what the safety
 * suite's store recorders and the guard tests read the store's execution order from.
 *
 * Not ioredis's `monitor()`: it puts its connection into monitor mode only when the +OK of MONITOR
 * has reached a promise callback, a microtask after the read that carried it. On a busy server
 * the first monitored command often comes in that same read; ioredis then finds no command
 * waiting for the line and throws "Command queue state error" from the socket's data handler,
 * which fails whichever test is running (CI's safety calibration did). Here every line after the
 * +OK is a monitored command.
 *
 * Events as ioredis's monitor connection emits them: `monitor` (time, args, source, database) for
 * each command, `error` (only to a listener), and `end` when the connection ends; `disconnect()`
 * closes it.
 */
import { EventEmitter } from 'node:events';
import { connect, type Socket } from 'node:net';

/** RedisMonitor is one MONITOR connection. */
export class RedisMonitor extends EventEmitter {
  readonly #socket: Socket;

  constructor(socket: Socket) {
    super();
    this.#socket = socket;
  }

  /** disconnect closes the connection (`end` follows). */
  disconnect(): void {
    this.#socket.destroy();
  }
}

/** MonitorLine is one monitored command. */
export interface MonitorLine {
  readonly time: string;
  readonly database: string;
  readonly source: string;
  readonly args: string[];
}

/**
 * parseMonitorLine reads one MONITOR line without its leading `+` (`1700000000.123456 [0
 * 127.0.0.1:5000] "SET" "k" "v"`): each argument is quoted, with redis's escapes (`\"`, `\\`,
 * `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`), and decoded as UTF-8. Undefined when it is not one.
 */
export function parseMonitorLine(line: string): MonitorLine | undefined {
  const head = /^(\d+\.\d+) \[(\d+) ([^\]]*)\] /.exec(line);
  if (head === null) return undefined;
  const args: string[] = [];
  let i = head[0].length;
  while (i < line.length) {
    if (line[i] !== '"') return undefined;
    i++;
    const bytes: number[] = [];
    for (;;) {
      if (i >= line.length) return undefined;
      const c = line[i] ?? '';
      if (c === '"') {
        i++;
        break;
      }
      if (c !== '\\') {
        bytes.push(line.charCodeAt(i));
        i++;
        continue;
      }
      const e = line[i + 1] ?? '';
      if (e === 'x') {
        bytes.push(Number.parseInt(line.slice(i + 2, i + 4), 16));
        i += 4;
        continue;
      }
      bytes.push((ESCAPES[e] ?? e).charCodeAt(0));
      i += 2;
    }
    args.push(Buffer.from(bytes).toString('utf8'));
    if (line[i] === ' ') i++;
  }
  return { time: head[1] ?? '', database: head[2] ?? '', source: head[3] ?? '', args };
}

const ESCAPES: Readonly<Record<string, string>> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };

/** openMonitor connects to `url` (redis://[user:password@]host:port), sends MONITOR and resolves once it is on. */
export function openMonitor(url: string): Promise<RedisMonitor> {
  const u = new URL(url);
  const socket = connect({ host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || '6379') });
  socket.setEncoding('latin1');
  const monitor = new RedisMonitor(socket);
  const commands: string[] = [];
  if (u.password !== '')
    commands.push(
      u.username !== ''
        ? command(['AUTH', decodeURIComponent(u.username), decodeURIComponent(u.password)])
        : command(['AUTH', decodeURIComponent(u.password)]),
    );
  commands.push(command(['MONITOR']));
  return new Promise((resolve, reject) => {
    let acks = commands.length;
    let rest = '';
    socket.once('connect', () => {
      socket.write(commands.join(''));
    });
    socket.on('data', (chunk: string) => {
      rest += chunk;
      let nl: number;
      while ((nl = rest.indexOf('\r\n')) >= 0) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 2);
        if (line.startsWith('-')) {
          const err = new Error(`redis MONITOR at ${u.host}: ${line.slice(1)}`);
          if (acks > 0) {
            socket.destroy();
            reject(err);
            return;
          }
          if (monitor.listenerCount('error') > 0) monitor.emit('error', err);
          continue;
        }
        if (acks > 0) {
          if (--acks === 0) resolve(monitor);
          continue;
        }
        const m = line.startsWith('+') ? parseMonitorLine(line.slice(1)) : undefined;
        if (m !== undefined) monitor.emit('monitor', m.time, m.args, m.source, m.database);
      }
    });
    socket.on('error', (err) => {
      if (acks > 0) reject(err);
      else if (monitor.listenerCount('error') > 0) monitor.emit('error', err);
    });
    socket.on('close', () => {
      if (acks > 0) reject(new Error(`redis MONITOR at ${u.host}: the connection closed`));
      monitor.emit('end');
    });
  });
}

/** command encodes one command in RESP. */
function command(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}
