/**
 * sendRaw: one HTTP request to a loopback port with exactly the given headers (Host included:
 * fetch would not let a test set it) and body, for the tests of the agent's local API and the
 * dashboard as a browser or a rebinding page would reach them.
 */
import { request } from 'node:http';

/** RawAnswer is a status and the whole body. */
export interface RawAnswer {
  readonly status: number;
  readonly body: string;
}

/** sendRaw sends one request to 127.0.0.1:port; the timeout only catches hangs. */
export function sendRaw(
  port: number,
  method: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  body?: string,
): Promise<RawAnswer> {
  return new Promise((done, fail) => {
    const req = request(
      { host: '127.0.0.1', port, method, path, headers: { ...headers }, timeout: 20_000, setHost: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, body: text });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** problemType is the `type` of a problem-details answer ('' when the body is not one). */
export function problemType(a: RawAnswer): string {
  try {
    return (JSON.parse(a.body) as { type?: string }).type ?? '';
  } catch {
    return '';
  }
}
