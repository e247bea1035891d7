/**
 * kubeconfig `exec` credential plugins (client.authentication.k8s.io v1 and v1beta1), as kubectl
 * runs them: the command with its args and env, KUBERNETES_EXEC_INFO describing the cluster, and
 * an ExecCredential read from its stdout. Only bearer tokens are supported; a plugin that answers
 * with a client certificate is refused with an error naming the user.
 */
import { execFile } from 'node:child_process';
import type { ExecConfig } from './config.ts';

/** ExecCredential is a plugin's answer: a token, and when it expires (wall clock, ms). */
export interface ExecCredential {
  readonly token: string | undefined;
  readonly expiresAtMs: number | undefined;
}

/** EXEC_TIMEOUT_MS bounds one run of a plugin. */
const EXEC_TIMEOUT_MS = 60_000;

/** runExecPlugin runs the plugin once and parses its ExecCredential. */
export async function runExecPlugin(exec: ExecConfig, server: URL): Promise<ExecCredential> {
  const where = `users[${exec.user}].user.exec (${exec.command})`;
  const info = JSON.stringify({
    apiVersion: exec.apiVersion,
    kind: 'ExecCredential',
    spec: { cluster: { server: server.href.replace(/\/$/, '') }, interactive: false },
  });
  const env: Record<string, string | undefined> = { ...process.env, KUBERNETES_EXEC_INFO: info };
  for (const e of exec.env) env[e.name] = e.value;
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      exec.command,
      [...exec.args],
      { env, timeout: EXEC_TIMEOUT_MS, maxBuffer: 1 << 20 },
      (err, out, errOut) => {
        if (err !== null)
          reject(
            new Error(`${where} failed: ${err.message}${errOut !== '' ? `: ${errOut.trim()}` : ''}`, { cause: err }),
          );
        else resolve(out);
      },
    );
  });
  return parseExecCredential(stdout, where);
}

/** parseExecCredential reads a plugin's stdout; `where` names the plugin in errors. */
export function parseExecCredential(stdout: string, where: string): ExecCredential {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    throw new Error(`${where} did not print an ExecCredential (JSON): ${JSON.stringify(stdout.slice(0, 80))}`);
  }
  const status = (doc as { status?: unknown } | null)?.status;
  if (typeof status !== 'object' || status === null) throw new Error(`${where}: the ExecCredential has no status`);
  const s = status as Record<string, unknown>;
  if (s.clientCertificateData !== undefined || s.clientKeyData !== undefined)
    throw new Error(`${where}: client certificates from exec plugins are not supported; use a token`);
  if (typeof s.token !== 'string' || s.token === '')
    throw new Error(`${where}: the ExecCredential has no status.token`);
  let expiresAtMs: number | undefined;
  if (s.expirationTimestamp !== undefined) {
    expiresAtMs = typeof s.expirationTimestamp === 'string' ? Date.parse(s.expirationTimestamp) : Number.NaN;
    if (Number.isNaN(expiresAtMs))
      throw new Error(`${where}: status.expirationTimestamp ${JSON.stringify(s.expirationTimestamp)} is not a time`);
  }
  return { token: s.token, expiresAtMs };
}
