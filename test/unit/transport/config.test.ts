import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load as jsYaml } from 'js-yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { bunPath } from '../../../hack/build-agent.ts';
import { ConfigError, inClusterConfig, mergeKubeconfigs, parseKubeconfig } from '../../../src/transport/config.ts';
import { parseExecCredential } from '../../../src/transport/exec-credential.ts';
import { loadClusterConfig, parseKubeconfigText } from '../../../src/transport/load-config.ts';

const PEM = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
const b64 = (b: Buffer): string => b.toString('base64');

/** doc is a one-context kubeconfig with `cluster` and `user` merged into a working default. */
function doc(
  cluster: Record<string, unknown> = {},
  user: Record<string, unknown> = {},
  context: Record<string, unknown> = {},
) {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'dev',
    clusters: [{ name: 'kind', cluster: { server: 'https://127.0.0.1:6443', ...cluster } }],
    users: [{ name: 'me', user }],
    contexts: [{ name: 'dev', context: { cluster: 'kind', user: 'me', ...context } }],
  };
}

describe('parseKubeconfig', () => {
  it.each([
    {
      name: 'a server, an inline CA and an inline client certificate and key',
      cluster: { 'certificate-authority-data': b64(PEM) },
      user: { 'client-certificate-data': b64(Buffer.from('cert')), 'client-key-data': b64(Buffer.from('key')) },
      want: { ca: { data: PEM }, clientCert: { data: Buffer.from('cert') }, clientKey: { data: Buffer.from('key') } },
    },
    {
      name: 'file paths, relative ones resolved against the kubeconfig directory',
      cluster: { 'certificate-authority': 'ca.crt' },
      user: { 'client-certificate': '/abs/client.crt', 'client-key': 'keys/client.key' },
      want: {
        ca: { file: '/home/dev/.kube/ca.crt' },
        clientCert: { file: '/abs/client.crt' },
        clientKey: { file: '/home/dev/.kube/keys/client.key' },
      },
    },
    {
      name: 'data wins over a file, as in client-go',
      cluster: { 'certificate-authority-data': b64(PEM), 'certificate-authority': '/ignored' },
      user: {},
      want: { ca: { data: PEM } },
    },
    {
      name: 'insecure-skip-tls-verify and tls-server-name',
      cluster: { 'insecure-skip-tls-verify': true, 'tls-server-name': 'kubernetes.default' },
      user: {},
      want: { insecureSkipTlsVerify: true, tlsServerName: 'kubernetes.default' },
    },
    { name: 'a bearer token', cluster: {}, user: { token: 's3cret' }, want: { token: 's3cret', tokenFile: undefined } },
    {
      name: 'a token file (tokenFile, as client-go spells it)',
      cluster: {},
      user: { tokenFile: 'token' },
      want: { tokenFile: '/home/dev/.kube/token' },
    },
    {
      name: 'an exec plugin',
      cluster: {},
      user: {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: 'aws',
          args: ['eks', 'get-token'],
          env: [{ name: 'AWS_PROFILE', value: 'dev' }],
        },
      },
      want: {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: 'aws',
          args: ['eks', 'get-token'],
          env: [{ name: 'AWS_PROFILE', value: 'dev' }],
          user: 'me',
        },
      },
    },
    {
      name: 'an http proxy-url (HTTP CONNECT)',
      cluster: { 'proxy-url': 'http://u:p@proxy:3128' },
      user: {},
      want: { proxy: new URL('http://u:p@proxy:3128') },
    },
    {
      name: 'username and password (HTTP basic)',
      cluster: {},
      user: { username: 'admin', password: 'x' },
      want: { basic: { username: 'admin', password: 'x' } },
    },
    {
      name: 'impersonation: as, as-uid, as-groups, as-user-extra',
      cluster: {},
      user: { as: 'alice', 'as-uid': 'u-1', 'as-groups': ['dev', 'ops'], 'as-user-extra': { scopes: ['a', 'b'] } },
      want: { impersonate: { user: 'alice', uid: 'u-1', groups: ['dev', 'ops'], extra: { scopes: ['a', 'b'] } } },
    },
    {
      name: 'the oidc auth provider, its CA file resolved against the kubeconfig directory',
      cluster: {},
      user: {
        'auth-provider': {
          name: 'oidc',
          config: {
            'id-token': 'a.b.c',
            'refresh-token': 'r',
            'idp-issuer-url': 'https://idp.example',
            'client-id': 'kubectl',
            'idp-certificate-authority': 'idp-ca.crt',
          },
        },
      },
      want: {
        oidc: {
          idToken: 'a.b.c',
          refreshToken: 'r',
          issuerUrl: 'https://idp.example',
          clientId: 'kubectl',
          clientSecret: undefined,
          ca: { file: '/home/dev/.kube/idp-ca.crt' },
          user: 'me',
        },
      },
    },
  ])('reads $name', ({ cluster, user, want }) => {
    const c = parseKubeconfig(doc(cluster, user, { namespace: 'team' }), '/home/dev/.kube/config');
    expect(c.server.href).toBe('https://127.0.0.1:6443/');
    expect(c.namespace).toBe('team');
    expect(c).toMatchObject(want);
  });

  it('defaults: TLS verified, no credentials, no namespace', () => {
    const c = parseKubeconfig(doc(), '/k');
    expect(c).toMatchObject({
      insecureSkipTlsVerify: false,
      ca: undefined,
      clientCert: undefined,
      clientKey: undefined,
      token: undefined,
      tokenFile: undefined,
      exec: undefined,
      basic: undefined,
      oidc: undefined,
      impersonate: undefined,
      proxy: undefined,
      namespace: undefined,
      tlsServerName: undefined,
    });
  });

  it('takes the context it is given over current-context', () => {
    const d = doc();
    d.clusters.push({ name: 'prod', cluster: { server: 'https://prod.example:443' } });
    d.contexts.push({ name: 'prod', context: { cluster: 'prod', user: 'me' } });
    expect(parseKubeconfig(d, '/k', 'prod').server.host).toBe('prod.example');
  });

  it.each([
    {
      name: 'no current-context',
      mutate: (d: Record<string, unknown>) => delete d['current-context'],
      error: '/k: current-context is not set',
    },
    {
      name: 'a current-context with no entry',
      mutate: (d: Record<string, unknown>) => (d['current-context'] = 'gone'),
      error: '/k: contexts has no entry named "gone"',
    },
    {
      name: 'a server that is not a URL',
      cluster: { server: 'not a url' },
      error: '/k: clusters[kind].cluster.server "not a url" is not a URL',
    },
    {
      name: 'a server with another scheme',
      cluster: { server: 'ftp://h:1' },
      error: '/k: clusters[kind].cluster.server "ftp://h:1": the scheme must be https or http',
    },
    { name: 'no server', cluster: { server: '' }, error: '/k: clusters[kind].cluster.server is not set' },
    {
      name: 'certificate-authority-data that is not base64',
      cluster: { 'certificate-authority-data': 'not*base64' },
      error: '/k: clusters[kind].cluster.certificate-authority-data is not base64 ("not*base64")',
    },
    {
      name: 'insecure-skip-tls-verify that is not a boolean',
      cluster: { 'insecure-skip-tls-verify': 'yes' },
      error: '/k: clusters[kind].cluster.insecure-skip-tls-verify "yes" is not true or false',
    },
    {
      name: 'a socks5 proxy-url',
      cluster: { 'proxy-url': 'socks5://proxy:1080' },
      error:
        '/k: clusters[kind].cluster.proxy-url "socks5://proxy:1080": only http:// proxies (HTTP CONNECT) are supported, not socks5://',
    },
    {
      name: 'a proxy-url that is not a URL',
      cluster: { 'proxy-url': 'proxy' },
      error: '/k: clusters[kind].cluster.proxy-url "proxy" is not a URL',
    },
    {
      name: 'a client certificate without a key',
      user: { 'client-certificate': '/c' },
      error: '/k: users[me].user.client-key is not set, but client-certificate is',
    },
    { name: 'a token that is not a string', user: { token: 42 }, error: '/k: users[me].user.token 42 is not a string' },
    {
      name: 'the gcp auth provider, which kubectl removed',
      user: { 'auth-provider': { name: 'gcp' } },
      error:
        '/k: users[me].user.auth-provider.name "gcp": the gcp auth provider was removed from kubectl; use the exec plugin gke-gcloud-auth-plugin',
    },
    {
      name: 'the azure auth provider, which kubectl removed',
      user: { 'auth-provider': { name: 'azure' } },
      error: '/k: users[me].user.auth-provider.name "azure": the azure auth provider was removed from kubectl',
    },
    {
      name: 'an auth provider kubectl never had',
      user: { 'auth-provider': { name: 'keystone' } },
      error: '/k: users[me].user.auth-provider.name "keystone" is not an auth provider kubectl has (only oidc)',
    },
    {
      name: 'an oidc provider with neither an id-token nor a refresh-token',
      user: { 'auth-provider': { name: 'oidc', config: {} } },
      error: '/k: users[me].user.auth-provider.config.id-token is not set (nor a refresh-token to get one)',
    },
    {
      name: 'an oidc refresh-token without an issuer',
      user: { 'auth-provider': { name: 'oidc', config: { 'refresh-token': 'r' } } },
      error: '/k: users[me].user.auth-provider.config.idp-issuer-url is not set, but refresh-token is',
    },
    {
      name: 'a password without a username',
      user: { password: 'x' },
      error: '/k: users[me].user.username is not set, but password is',
    },
    {
      name: 'impersonated groups without a user',
      user: { 'as-groups': ['dev'] },
      error: '/k: users[me].user.as is not set, but as-groups is',
    },
    {
      name: 'as-groups that is not a list of strings',
      user: { as: 'alice', 'as-groups': 'dev' },
      error: '/k: users[me].user.as-groups "dev" is not a list of strings',
    },
    {
      name: 'as-user-extra whose values are not lists',
      user: { as: 'alice', 'as-user-extra': { scopes: 'a' } },
      error: '/k: users[me].user.as-user-extra.scopes "a" is not a list of strings',
    },
    {
      name: 'an exec plugin without a command',
      user: { exec: { apiVersion: 'client.authentication.k8s.io/v1' } },
      error: '/k: users[me].user.exec.command is not set',
    },
    {
      name: 'an exec plugin of another API',
      user: { exec: { apiVersion: 'v1', command: 'x' } },
      error: '/k: users[me].user.exec.apiVersion "v1" is not client.authentication.k8s.io/v1 or v1beta1',
    },
  ] as {
    name: string;
    mutate?: (d: Record<string, unknown>) => unknown;
    cluster?: Record<string, unknown>;
    user?: Record<string, unknown>;
    error: string;
  }[])('refuses $name, naming the field and the value', ({ mutate, cluster, user, error }) => {
    const d: Record<string, unknown> = doc(cluster, user);
    mutate?.(d);
    expect(() => parseKubeconfig(d, '/k')).toThrow(ConfigError);
    expect(() => parseKubeconfig(d, '/k')).toThrow(error);
  });

  it('refuses a document that is not a mapping', () => {
    expect(() => parseKubeconfig('just text', '/k')).toThrow('/k "just text" is not a mapping');
  });
});

describe('mergeKubeconfigs', () => {
  it('keeps the first current-context and the first entry of each name, as kubectl does', () => {
    const a = { clusters: [{ name: 'x', cluster: { server: 'https://a' } }] };
    const b = { ...doc(), clusters: [{ name: 'x', cluster: { server: 'https://b' } }, ...doc().clusters] };
    const m = mergeKubeconfigs([a, b]);
    expect(m['current-context']).toBe('dev');
    expect(
      (m.clusters as { name: string; cluster: { server: string } }[]).map((c) => [c.name, c.cluster.server]),
    ).toEqual([
      ['x', 'https://a'],
      ['kind', 'https://127.0.0.1:6443'],
    ]);
  });
});

describe('inClusterConfig', () => {
  it('is the service host and port, the ServiceAccount token file and CA, and its namespace', () => {
    const c = inClusterConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, '/sa', 'team\n');
    expect(c).toMatchObject({
      source: 'in-cluster',
      ca: { file: '/sa/ca.crt' },
      tokenFile: '/sa/token',
      namespace: 'team',
      insecureSkipTlsVerify: false,
    });
    expect(c.server.href).toBe('https://10.0.0.1/'); // 443 is https's default
  });

  it('brackets an IPv6 host', () => {
    expect(
      inClusterConfig({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, '/sa', undefined).server
        .host,
    ).toBe('[fd00::1]');
  });

  it.each([
    { env: {}, error: 'in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)' },
    {
      env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: 'https' },
      error: 'in-cluster: KUBERNETES_SERVICE_PORT "https" is not a port number',
    },
  ])('refuses $error', ({ env, error }) => {
    expect(() => inClusterConfig(env, '/sa', undefined)).toThrow(error);
  });
});

describe('loadClusterConfig (the order: --kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fencepost-load-config-'));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const write = (name: string, server: string): string => {
    const path = join(dir, name);
    mkdirSync(join(path, '..'), { recursive: true });
    // YAML, as kubectl writes it.
    writeFileSync(
      path,
      `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: ${server}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: ns\n`,
    );
    return path;
  };
  const flag = write('flag.yaml', 'https://flag:1');
  const env = write('env.yaml', 'https://env:1');
  write('home/.kube/config', 'https://home:1');
  const sa = join(dir, 'sa');
  mkdirSync(sa);
  writeFileSync(join(sa, 'token'), 'tok');
  writeFileSync(join(sa, 'namespace'), 'pods-ns');
  const inCluster = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };

  it.each([
    {
      name: '--kubeconfig first',
      path: flag,
      env: { KUBECONFIG: env, ...inCluster },
      home: join(dir, 'home'),
      want: 'flag',
    },
    {
      name: 'then $KUBECONFIG',
      path: undefined,
      env: { KUBECONFIG: env, ...inCluster },
      home: join(dir, 'home'),
      want: 'env',
    },
    { name: 'then ~/.kube/config', path: undefined, env: inCluster, home: join(dir, 'home'), want: 'home' },
    {
      name: 'then the in-cluster ServiceAccount',
      path: undefined,
      env: inCluster,
      home: join(dir, 'nohome'),
      want: '10.0.0.1',
    },
  ])('$name', ({ path, env: e, home, want }) => {
    const c = loadClusterConfig(path, { env: e, home, serviceAccountDir: sa });
    expect(c.server.hostname).toBe(want);
  });

  it('reads a YAML kubeconfig: token, namespace, insecure-skip-tls-verify', () => {
    expect(loadClusterConfig(flag, { env: {} })).toMatchObject({
      token: 't',
      namespace: 'ns',
      insecureSkipTlsVerify: true,
    });
  });

  it('the in-cluster namespace comes from the ServiceAccount', () => {
    expect(
      loadClusterConfig(undefined, { env: inCluster, home: join(dir, 'nohome'), serviceAccountDir: sa }).namespace,
    ).toBe('pods-ns');
  });

  it('nothing configured is an error naming every place it looked', () => {
    expect(() =>
      loadClusterConfig(undefined, { env: {}, home: join(dir, 'nohome'), serviceAccountDir: join(dir, 'nosa') }),
    ).toThrow(
      /no API server configured: no --kubeconfig, no \$KUBECONFIG, no .*nohome\/\.kube\/config, and no ServiceAccount token at .*nosa\/token/,
    );
  });

  it('a missing or malformed file is an error naming it', () => {
    expect(() => loadClusterConfig(join(dir, 'missing'), { env: {} })).toThrow(
      `kubeconfig ${join(dir, 'missing')}: ENOENT`,
    );
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'clusters: [unclosed');
    expect(() => loadClusterConfig(bad, { env: {} })).toThrow(`${bad}: not a YAML kubeconfig`);
  });
});

// Under Node a YAML kubeconfig is read by js-yaml, under Bun (the compiled agent) by Bun's built-in
// parser; JSON by neither. The documents below hold what kubeconfigs hold in the wild.
const YAML_DOCS: readonly string[] = [
  `# kubectl's own output\napiVersion: v1\nkind: Config\ncurrent-context: kind-dev\npreferences: {}\nclusters:\n- cluster:\n    certificate-authority-data: ${b64(PEM)}\n    server: https://127.0.0.1:6443\n  name: kind-dev\nusers:\n- name: kind-dev\n  user:\n    token: "0123456789"\ncontexts:\n- context:\n    cluster: kind-dev\n    user: kind-dev\n    namespace: 'shop'\n  name: kind-dev\n`,
  'clusters:\n  - name: a\n    cluster: {server: "https://a:443", insecure-skip-tls-verify: true, proxy-url: null}\nusers: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token, --cluster-name, prod], env: ~, interactiveMode: Never, provideClusterInfo: false}}}]\n',
  'anchors:\n  base: &b {cluster: c, user: u}\ncontexts:\n  - name: x\n    context: *b\n  - name: y\n    context: *b\n',
  "text:\n  folded: >\n    one\n    two\n  literal: |\n    line 1\n    line 2\n  numbers: [1, 0.5, 0x1F, 1e3, '007', 010]\n  words: [yes, no, on, off, true, false, True, NULL, ~]\n",
];

describe('parseKubeconfigText (YAML under Node and under Bun, JSON without a YAML parser)', () => {
  it('js-yaml (Node) and Bun.YAML (the compiled agent) read every document alike', () => {
    const script = `process.stdout.write(JSON.stringify(JSON.parse(await Bun.stdin.text()).map((d) => Bun.YAML.parse(d))))`;
    const underBun = JSON.parse(
      execFileSync(bunPath(), ['-e', script], { input: JSON.stringify(YAML_DOCS), encoding: 'utf8' }),
    ) as unknown[];
    const underNode = YAML_DOCS.map((d) => parseKubeconfigText(d, 'doc'));
    expect(underNode).toEqual(YAML_DOCS.map((d) => jsYaml(d)));
    expect(underBun).toEqual(JSON.parse(JSON.stringify(underNode)));
  });

  it('the one difference: a merge key (<<) is merged by Bun, as kubectl does, and kept as a key by js-yaml', () => {
    const text = 'base: &b {cluster: c}\ncontext: {<<: *b, namespace: y}\n';
    const underBun = execFileSync(
      bunPath(),
      ['-e', `process.stdout.write(JSON.stringify(Bun.YAML.parse(${JSON.stringify(text)})))`],
      {
        encoding: 'utf8',
      },
    );
    expect(JSON.parse(underBun)).toEqual({ base: { cluster: 'c' }, context: { cluster: 'c', namespace: 'y' } });
    expect(parseKubeconfigText(text, 'doc')).toEqual({
      base: { cluster: 'c' },
      context: { '<<': { cluster: 'c' }, namespace: 'y' },
    });
  });

  it('reads JSON (what client-node exportConfig() writes) as JSON, and a YAML flow mapping as YAML', () => {
    expect(parseKubeconfigText(JSON.stringify(doc()), 'json')).toEqual(doc());
    expect(parseKubeconfigText('  {kind: Config, clusters: []}', 'flow')).toEqual({ kind: 'Config', clusters: [] });
  });

  it('names the source of a document neither reads', () => {
    expect(() => parseKubeconfigText('{"kind": "Config"', 'broken.json')).toThrow('broken.json: not a YAML kubeconfig');
  });
});

describe('parseExecCredential', () => {
  it('reads the token and its expiry', () => {
    expect(
      parseExecCredential(
        JSON.stringify({
          kind: 'ExecCredential',
          status: { token: 'abc', expirationTimestamp: '2030-01-01T00:00:00Z' },
        }),
        'p',
      ),
    ).toEqual({ token: 'abc', expiresAtMs: Date.parse('2030-01-01T00:00:00Z') });
  });
  it.each([
    { out: 'not json', error: 'p did not print an ExecCredential (JSON)' },
    { out: '{}', error: 'p: the ExecCredential has no status' },
    { out: '{"status":{}}', error: 'p: the ExecCredential has no status.token' },
    {
      out: '{"status":{"clientCertificateData":"x","clientKeyData":"y"}}',
      error: 'client certificates from exec plugins are not supported',
    },
    {
      out: '{"status":{"token":"t","expirationTimestamp":"soon"}}',
      error: 'p: status.expirationTimestamp "soon" is not a time',
    },
  ])('refuses $out', ({ out, error }) => {
    expect(() => parseExecCredential(out, 'p')).toThrow(error);
  });
});
