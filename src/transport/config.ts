/**
 * Connection settings for one API server, parsed from a kubeconfig document or from the pod's
 * in-cluster environment. Pure: the caller reads the files (load-config.ts); paths inside a
 * kubeconfig are resolved against its directory, as kubectl does, and read later by the client
 * (so that files that rotate are read again, credentials.ts).
 *
 * Supported: `current-context`; a cluster's `server`, `certificate-authority`,
 * `certificate-authority-data`, `insecure-skip-tls-verify`, `tls-server-name`; a user's
 * `client-certificate(-data)`, `client-key(-data)`, `token`, `tokenFile`, and `exec` credential
 * plugins (client.authentication.k8s.io, exec-credential.ts). Anything else that authenticates
 * (`auth-provider`, `username`/`password`, impersonation, `proxy-url`) is refused with an error
 * naming the user or cluster and the field, rather than ignored.
 */
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, resolve } from 'node:path';

/** Material is a PEM or token: bytes given inline, or a file read by the client (and re-read). */
export type Material = { readonly file: string } | { readonly data: Buffer };

/** ExecConfig is a kubeconfig user's `exec` credential plugin (client.authentication.k8s.io). */
export interface ExecConfig {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: readonly { readonly name: string; readonly value: string }[];
  readonly apiVersion: string;
  /** user names the kubeconfig user, for errors. */
  readonly user: string;
}

/** ClusterConfig is how to reach and authenticate to one API server. */
export interface ClusterConfig {
  /** server is the API server's base URL (https://host:port, maybe with a path prefix). */
  readonly server: URL;
  /** source names where the settings came from (a file, `in-cluster`), for errors and logs. */
  readonly source: string;
  readonly ca: Material | undefined;
  readonly insecureSkipTlsVerify: boolean;
  readonly tlsServerName: string | undefined;
  readonly clientCert: Material | undefined;
  readonly clientKey: Material | undefined;
  /** token is a bearer token given inline; tokenFile one read from a file (and re-read). */
  readonly token: string | undefined;
  readonly tokenFile: string | undefined;
  readonly exec: ExecConfig | undefined;
  /** namespace is the context's (or the ServiceAccount's) namespace, if any. */
  readonly namespace: string | undefined;
}

/** ConfigError is a kubeconfig or environment that cannot be used; its message names the field and the value. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** SERVICE_ACCOUNT_DIR is where the kubelet mounts a pod's ServiceAccount token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * inClusterConfig is the pod's own API server: KUBERNETES_SERVICE_HOST and _PORT, the
 * ServiceAccount token file (re-read by the client as the kubelet rotates it) and its CA — as
 * client-go's InClusterConfig (and client-node's loadFromCluster, which also speaks plain HTTP
 * on ports 80, 8080 and 8001).
 */
export function inClusterConfig(
  env: Readonly<Record<string, string | undefined>>,
  saDir: string,
  namespace: string | undefined,
): ClusterConfig {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host === undefined || host === '')
    throw new ConfigError('in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)');
  if (port === undefined || !/^[0-9]{1,5}$/.test(port))
    throw new ConfigError(`in-cluster: KUBERNETES_SERVICE_PORT ${JSON.stringify(port)} is not a port number`);
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const server = parseServer(
    `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    'in-cluster: KUBERNETES_SERVICE_HOST',
  );
  return {
    server,
    source: 'in-cluster',
    ca: { file: `${saDir}/ca.crt` },
    insecureSkipTlsVerify: false,
    tlsServerName: undefined,
    clientCert: undefined,
    clientKey: undefined,
    token: undefined,
    tokenFile: `${saDir}/token`,
    exec: undefined,
    namespace: namespace?.trim() || undefined,
  };
}

/**
 * parseKubeconfig picks the current context of a parsed kubeconfig document (`doc`, from YAML or
 * JSON) and returns its cluster and user. `source` names the file (errors, and the base of
 * relative paths). `context` overrides `current-context`.
 *
 * @throws ConfigError naming the field and value that are missing, malformed or unsupported.
 */
export function parseKubeconfig(doc: unknown, source: string, context?: string): ClusterConfig {
  const root = asRecord(doc, source);
  const currentName = context ?? optString(root, 'current-context', source);
  if (currentName === undefined || currentName === '') throw new ConfigError(`${source}: current-context is not set`);
  const ctxAt = `${source}: contexts[${currentName}].context`;
  const ctx = asRecord(named(root, 'contexts', currentName, source).context, ctxAt);
  const clusterName = optString(ctx, 'cluster', ctxAt);
  const userName = optString(ctx, 'user', ctxAt);
  if (clusterName === undefined || clusterName === '') throw new ConfigError(`${ctxAt}.cluster is not set`);
  const cAt = `${source}: clusters[${clusterName}].cluster`;
  const uAt = `${source}: users[${userName ?? ''}].user`;
  const cluster = asRecord(named(root, 'clusters', clusterName, source).cluster, cAt);
  const user =
    userName !== undefined && userName !== '' ? asRecord(named(root, 'users', userName, source).user ?? {}, uAt) : {};
  const base = dirname(source);
  const path = (p: string): string => (isAbsolute(p) ? p : resolve(base, p));

  const serverText = optString(cluster, 'server', cAt);
  if (serverText === undefined || serverText === '') throw new ConfigError(`${cAt}.server is not set`);
  if (cluster['proxy-url'] !== undefined && cluster['proxy-url'] !== null)
    throw new ConfigError(`${cAt}.proxy-url ${JSON.stringify(cluster['proxy-url'])}: proxies are not supported`);
  for (const field of ['auth-provider', 'username', 'password', 'as', 'as-groups', 'as-uid', 'as-user-extra'])
    if (user[field] !== undefined && user[field] !== null)
      throw new ConfigError(
        `${uAt}.${field} is not supported; use a token, tokenFile, client certificate or exec plugin`,
      );

  const material = (rec: Record<string, unknown>, fileField: string, dataField: string, at: string) => {
    const data = optString(rec, dataField, at);
    const file = optString(rec, fileField, at);
    if (data !== undefined && data !== '') return { data: decodeBase64(data, `${at}.${dataField}`) };
    if (file !== undefined && file !== '') return { file: path(file) };
    return undefined;
  };
  const clientCert = material(user, 'client-certificate', 'client-certificate-data', uAt);
  const clientKey = material(user, 'client-key', 'client-key-data', uAt);
  if ((clientCert === undefined) !== (clientKey === undefined))
    throw new ConfigError(
      clientCert === undefined
        ? `${uAt}.client-certificate is not set, but client-key is`
        : `${uAt}.client-key is not set, but client-certificate is`,
    );
  const tokenFile = optString(user, 'tokenFile', uAt) ?? optString(user, 'token-file', uAt);
  const namespace = optString(ctx, 'namespace', ctxAt);
  const tlsServerName = optString(cluster, 'tls-server-name', cAt);
  const token = optString(user, 'token', uAt);
  return {
    server: parseServer(serverText, `${cAt}.server`),
    source,
    ca: material(cluster, 'certificate-authority', 'certificate-authority-data', cAt),
    insecureSkipTlsVerify: optBool(cluster, 'insecure-skip-tls-verify', cAt) ?? false,
    tlsServerName: tlsServerName !== undefined && tlsServerName !== '' ? tlsServerName : undefined,
    clientCert,
    clientKey,
    token: token !== undefined && token !== '' ? token : undefined,
    tokenFile: tokenFile !== undefined && tokenFile !== '' ? path(tokenFile) : undefined,
    exec:
      user.exec !== undefined && user.exec !== null ? parseExec(user.exec, `${uAt}.exec`, userName ?? '') : undefined,
    namespace: namespace !== undefined && namespace !== '' ? namespace : undefined,
  };
}

/**
 * mergeKubeconfigs merges the documents of a $KUBECONFIG list as kubectl does: the first file
 * that sets `current-context` wins, and of two entries with the same name the first one's.
 */
export function mergeKubeconfigs(docs: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = { clusters: [], contexts: [], users: [] };
  for (const doc of docs) {
    if (typeof doc !== 'object' || doc === null) continue;
    const d = doc as Record<string, unknown>;
    if (out['current-context'] === undefined && typeof d['current-context'] === 'string' && d['current-context'] !== '')
      out['current-context'] = d['current-context'];
    for (const list of ['clusters', 'contexts', 'users']) {
      const have = out[list] as Record<string, unknown>[];
      const items = d[list];
      if (!Array.isArray(items)) continue;
      for (const item of items as unknown[])
        if (
          typeof item === 'object' &&
          item !== null &&
          !have.some((h) => h.name === (item as Record<string, unknown>).name)
        )
          have.push(item as Record<string, unknown>);
    }
  }
  return out;
}

function parseExec(v: unknown, where: string, user: string): ExecConfig {
  const e = asRecord(v, where);
  const command = optString(e, 'command', where);
  if (command === undefined || command === '') throw new ConfigError(`${where}.command is not set`);
  const args = e.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))
    throw new ConfigError(`${where}.args ${JSON.stringify(args)} is not a list of strings`);
  const envList = e.env ?? [];
  if (!Array.isArray(envList)) throw new ConfigError(`${where}.env ${JSON.stringify(envList)} is not a list`);
  const env = (envList as unknown[]).map((x, i) => {
    const r = asRecord(x, `${where}.env[${i}]`);
    if (typeof r.name !== 'string' || typeof r.value !== 'string')
      throw new ConfigError(`${where}.env[${i}] ${JSON.stringify(x)} needs a string name and value`);
    return { name: r.name, value: r.value };
  });
  const apiVersion = optString(e, 'apiVersion', where) ?? '';
  if (!apiVersion.startsWith('client.authentication.k8s.io/'))
    throw new ConfigError(
      `${where}.apiVersion ${JSON.stringify(apiVersion)} is not client.authentication.k8s.io/v1 or v1beta1`,
    );
  return { command, args, env, apiVersion, user };
}

function parseServer(text: string, where: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${where} ${JSON.stringify(text)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError(`${where} ${JSON.stringify(text)}: the scheme must be https or http`);
  if (url.search !== '' || url.hash !== '')
    throw new ConfigError(`${where} ${JSON.stringify(text)} has a query or fragment`);
  return url;
}

function decodeBase64(text: string, where: string): Buffer {
  const compact = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0)
    throw new ConfigError(
      `${where} is not base64 (${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text)})`,
    );
  return Buffer.from(compact, 'base64');
}

function named(root: Record<string, unknown>, list: string, name: string, source: string): Record<string, unknown> {
  const items = root[list];
  if (items !== undefined && items !== null && !Array.isArray(items))
    throw new ConfigError(`${source}: ${list} is not a list`);
  const found = ((items ?? []) as unknown[]).find(
    (i) => typeof i === 'object' && i !== null && (i as Record<string, unknown>).name === name,
  );
  if (found === undefined) throw new ConfigError(`${source}: ${list} has no entry named ${JSON.stringify(name)}`);
  return found as Record<string, unknown>;
}

function asRecord(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new ConfigError(`${where} ${JSON.stringify(v) ?? 'undefined'} is not a mapping`);
  return v as Record<string, unknown>;
}

/** optString reads `field` of `r` (at `prefix`, for errors): a string, or undefined when absent. */
function optString(r: Record<string, unknown>, field: string, prefix: string): string | undefined {
  const v = r[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ConfigError(`${prefix}.${field} ${JSON.stringify(v)} is not a string`);
  return v;
}

function optBool(r: Record<string, unknown>, field: string, prefix: string): boolean | undefined {
  const v = r[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new ConfigError(`${prefix}.${field} ${JSON.stringify(v)} is not true or false`);
  return v;
}
