/**
 * Connection settings for one API server, parsed from a kubeconfig document or from the pod's
 * in-cluster environment. Pure: the caller reads the files (load-config.ts); paths inside a
 * kubeconfig are resolved against its directory, as kubectl does, and read later by the client
 * (so that files that rotate are read again, credentials.ts).
 *
 * Supported — what kubectl 1.36 loads: `current-context`; a cluster's `server`,
 * `certificate-authority(-data)`, `insecure-skip-tls-verify`, `tls-server-name`, `proxy-url`
 * (an `http://` proxy, reached with HTTP CONNECT); a user's `client-certificate(-data)`,
 * `client-key(-data)`, `token`, `tokenFile`, `username`/`password` (HTTP basic), `exec`
 * credential plugins (client.authentication.k8s.io, exec-credential.ts), impersonation (`as`,
 * `as-uid`, `as-groups`, `as-user-extra`, sent as Impersonate-* headers) and the one auth provider
 * kubectl still has, `oidc` (its `id-token`, refreshed with its `refresh-token`: oidc.ts). What
 * kubectl refuses too (the removed `gcp` and `azure` providers) or what we do not speak (a
 * `socks5://` or `https://` proxy) is refused with an error naming the user or cluster and the
 * field, rather than ignored.
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

/** Impersonation is whom the requests act as (kubectl's --as, --as-uid, --as-group, and their kubeconfig fields). */
export interface Impersonation {
  readonly user: string | undefined;
  readonly uid: string | undefined;
  readonly groups: readonly string[];
  /** extra: the user's extra fields, each sent as Impersonate-Extra-<key> headers. */
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** OidcConfig is a user's `auth-provider: {name: oidc}` config (client-go's oidc plugin fields). */
export interface OidcConfig {
  readonly idToken: string | undefined;
  readonly refreshToken: string | undefined;
  readonly issuerUrl: string | undefined;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  /** ca: the identity provider's CA (`idp-certificate-authority(-data)`), if not the system's. */
  readonly ca: Material | undefined;
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
  /** basic is a username and password sent as HTTP basic authentication. */
  readonly basic: { readonly username: string; readonly password: string } | undefined;
  /** oidc is the `oidc` auth provider's tokens. */
  readonly oidc: OidcConfig | undefined;
  /** impersonate: whom to act as, or undefined to act as oneself. */
  readonly impersonate: Impersonation | undefined;
  /** proxy is an HTTP proxy that requests are tunnelled through with CONNECT. */
  readonly proxy: URL | undefined;
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

/** UnknownContextError is a context asked for by name (--context) that the kubeconfig does not have. */
export class UnknownContextError extends ConfigError {
  readonly context: string;
  /** known: the names of the contexts the kubeconfig has. */
  readonly known: readonly string[];
  constructor(source: string, context: string, known: readonly string[]) {
    super(
      `${source}: no context ${JSON.stringify(context)} in the kubeconfig (it has: ${known.length > 0 ? known.join(', ') : 'none'})`,
    );
    this.name = 'UnknownContextError';
    this.context = context;
    this.known = known;
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
    basic: undefined,
    oidc: undefined,
    impersonate: undefined,
    proxy: undefined,
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
  if (context !== undefined) {
    const contexts = Array.isArray(root.contexts) ? (root.contexts as unknown[]) : [];
    const known = contexts.flatMap((c) => {
      const name = typeof c === 'object' && c !== null ? (c as Record<string, unknown>).name : undefined;
      return typeof name === 'string' ? [name] : [];
    });
    if (!known.includes(context)) throw new UnknownContextError(source, context, known);
  }
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
  const proxyText = optString(cluster, 'proxy-url', cAt);
  const proxy = proxyText !== undefined && proxyText !== '' ? parseProxy(proxyText, `${cAt}.proxy-url`) : undefined;

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
  const username = optString(user, 'username', uAt);
  const password = optString(user, 'password', uAt);
  if ((password ?? '') !== '' && (username ?? '') === '')
    throw new ConfigError(`${uAt}.username is not set, but password is`);
  const authProvider = user['auth-provider'];
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
    basic: username !== undefined && username !== '' ? { username, password: password ?? '' } : undefined,
    oidc:
      authProvider !== undefined && authProvider !== null
        ? parseAuthProvider(authProvider, `${uAt}.auth-provider`, userName ?? '', path)
        : undefined,
    impersonate: parseImpersonation(user, uAt),
    proxy,
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

/**
 * parseAuthProvider reads a user's `auth-provider`. kubectl 1.36 has one: `oidc`. Its `gcp` and
 * `azure` providers were removed (kubectl answers them with an error pointing at the exec
 * plugins that replaced them), and so are they here.
 */
function parseAuthProvider(v: unknown, where: string, user: string, path: (p: string) => string): OidcConfig {
  const p = asRecord(v, where);
  const name = optString(p, 'name', where);
  if (name === 'gcp')
    throw new ConfigError(
      `${where}.name "gcp": the gcp auth provider was removed from kubectl; use the exec plugin gke-gcloud-auth-plugin`,
    );
  if (name === 'azure')
    throw new ConfigError(
      `${where}.name "azure": the azure auth provider was removed from kubectl; use the exec plugin kubelogin`,
    );
  if (name !== 'oidc')
    throw new ConfigError(
      `${where}.name ${JSON.stringify(name ?? '')} is not an auth provider kubectl has (only oidc)`,
    );
  const cfg = p.config === undefined || p.config === null ? {} : asRecord(p.config, `${where}.config`);
  const at = `${where}.config`;
  const str = (field: string): string | undefined => {
    const s = optString(cfg, field, at);
    return s !== undefined && s !== '' ? s : undefined;
  };
  const idToken = str('id-token');
  const refreshToken = str('refresh-token');
  const issuerUrl = str('idp-issuer-url');
  if (idToken === undefined && refreshToken === undefined)
    throw new ConfigError(`${at}.id-token is not set (nor a refresh-token to get one)`);
  if (refreshToken !== undefined && issuerUrl === undefined)
    throw new ConfigError(`${at}.idp-issuer-url is not set, but refresh-token is`);
  if (issuerUrl !== undefined) parseServer(issuerUrl, `${at}.idp-issuer-url`);
  const caData = str('idp-certificate-authority-data');
  const caFile = str('idp-certificate-authority');
  return {
    idToken,
    refreshToken,
    issuerUrl,
    clientId: str('client-id'),
    clientSecret: str('client-secret'),
    ca:
      caData !== undefined
        ? { data: decodeBase64(caData, `${at}.idp-certificate-authority-data`) }
        : caFile !== undefined
          ? { file: path(caFile) }
          : undefined,
    user,
  };
}

/** parseImpersonation reads `as`, `as-uid`, `as-groups` and `as-user-extra`; undefined when none is set. */
function parseImpersonation(user: Record<string, unknown>, at: string): Impersonation | undefined {
  const as = optString(user, 'as', at);
  const uid = optString(user, 'as-uid', at);
  const groups = user['as-groups'] ?? [];
  if (!Array.isArray(groups) || !groups.every((g) => typeof g === 'string'))
    throw new ConfigError(`${at}.as-groups ${JSON.stringify(groups)} is not a list of strings`);
  const extraIn = user['as-user-extra'] ?? {};
  const extraRec = asRecord(extraIn, `${at}.as-user-extra`);
  const extra: Record<string, readonly string[]> = {};
  for (const [k, v] of Object.entries(extraRec)) {
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
      throw new ConfigError(`${at}.as-user-extra.${k} ${JSON.stringify(v)} is not a list of strings`);
    extra[k] = v;
  }
  const user_ = as !== undefined && as !== '' ? as : undefined;
  const uid_ = uid !== undefined && uid !== '' ? uid : undefined;
  if (user_ === undefined && uid_ === undefined && groups.length === 0 && Object.keys(extra).length === 0)
    return undefined;
  // The API server impersonates a user, never groups or extras alone (client-go refuses these too).
  if (user_ === undefined)
    throw new ConfigError(
      `${at}.as is not set, but ${uid_ !== undefined ? 'as-uid' : groups.length > 0 ? 'as-groups' : 'as-user-extra'} is`,
    );
  return { user: user_, uid: uid_, groups, extra };
}

/** parseProxy reads `proxy-url`: an http:// proxy (CONNECT). kubectl also speaks https:// and socks5:// proxies; we do not. */
function parseProxy(text: string, where: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${where} ${JSON.stringify(text)} is not a URL`);
  }
  if (url.protocol !== 'http:')
    throw new ConfigError(
      `${where} ${JSON.stringify(text)}: only http:// proxies (HTTP CONNECT) are supported, not ${url.protocol.replace(/:$/, '')}://`,
    );
  return url;
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
