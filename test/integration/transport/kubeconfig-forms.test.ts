/**
 * Every kubeconfig form kubectl loads, loaded the way each binary loads it — the controller
 * (kube/typed-api.ts apiClientFor, then client-node's typed APIs over it), the agent
 * (transport/connect.ts connect) and the kubectl plugin (cli/plugin/read.ts connect) — and used
 * against the real API server: client certificates from files and inline, a bearer token, a token
 * file that rotates, an exec credential plugin, the oidc auth provider's id-token, impersonation
 * (allowed and refused by RBAC), an HTTP CONNECT proxy, and username/password. Who the server
 * took us for is asked with a SelfSubjectReview, so each form shows the identity it authenticated.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthenticationV1Api, CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as pluginConnect } from '../../../src/cli/plugin/read.ts';
import { apiClientFor } from '../../../src/kube/api-client.ts';
import { typedApi } from '../../support/typed-api.ts';
import { httpStatus } from '../../../src/runtime/errors.ts';
import type { ApiClient } from '../../../src/transport/client.ts';
import { connect as agentConnect } from '../../../src/transport/connect.ts';
import { freshNamespace, sharedKubeConfig, sharedKubeconfigPath } from '../../support/env.ts';

/** Who is what a SelfSubjectReview says about the caller. */
interface Who {
  readonly username: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

const SSR = {
  path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
  body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
};

function whoFrom(review: unknown): Who {
  const u = (review as { status?: { userInfo?: Record<string, unknown> } }).status?.userInfo ?? {};
  return {
    username: typeof u.username === 'string' ? u.username : '',
    ...(typeof u.uid === 'string' ? { uid: u.uid } : {}),
    groups: (u.groups as string[] | undefined) ?? [],
    ...(u.extra !== undefined ? { extra: u.extra as Record<string, string[]> } : {}),
  };
}

/** LOADERS: how each binary loads a kubeconfig file and asks who it is. */
const LOADERS: readonly { readonly name: string; readonly whoami: (kubeconfig: string) => Promise<Who> }[] = [
  {
    name: 'the controller',
    whoami: async (kubeconfig) => {
      const api = track(apiClientFor(kubeconfig));
      return whoFrom(await typedApi(api, AuthenticationV1Api).createSelfSubjectReview({ body: SSR.body }));
    },
  },
  {
    name: 'the agent',
    whoami: async (kubeconfig) => {
      const api = track(agentConnect(kubeconfig));
      return whoFrom(await api.request({ method: 'POST', path: SSR.path, body: SSR.body }));
    },
  },
  {
    name: 'the plugin',
    whoami: async (kubeconfig) => {
      const c = pluginConnect({ kubeconfig, context: undefined, namespace: undefined });
      return whoFrom(await c.json.request({ method: 'POST', path: SSR.path, body: SSR.body }));
    },
  },
];

/** said is everything an error carries as text: its message and its body (a Status, as JSON or text). */
function said(err: unknown): string {
  const body = (err as { body?: unknown } | null)?.body;
  return `${String(err)} ${typeof body === 'string' ? body : JSON.stringify(body)}`;
}

const opened: ApiClient[] = [];
function track(api: ApiClient): ApiClient {
  opened.push(api);
  return api;
}

describe('every kubeconfig form, in the controller, the agent and the plugin', () => {
  const admin: KubeConfig = sharedKubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  let namespace = '';
  let dir = '';
  let server = '';
  let ca = '';
  let certFile = '';
  let keyFile = '';

  const tokenOf = async (name: string): Promise<string> => {
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch(() => undefined);
    const tr = await core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    return tr.status?.token ?? '';
  };
  const sa = (name: string): string => `system:serviceaccount:${namespace}:${name}`;

  /** write writes a one-context kubeconfig with `cluster` and `user` merged in, and returns its path. */
  let files = 0;
  const write = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string => {
    const path = join(dir, `kubeconfig-${++files}`);
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'c',
        clusters: [{ name: 'c', cluster: { server, 'certificate-authority': ca, ...cluster } }],
        users: [{ name: 'u', user }],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      }),
    );
    return path;
  };

  beforeAll(async () => {
    namespace = await freshNamespace(admin, 'kubeconfig-forms-');
    dir = mkdtempSync(join(tmpdir(), 'fencepost-kubeconfig-forms-'));
    const shared = JSON.parse(readFileSync(sharedKubeconfigPath(), 'utf8')) as {
      clusters: { cluster: Record<string, string> }[];
      users: { user: Record<string, string> }[];
    };
    server = shared.clusters[0]?.cluster.server ?? '';
    ca = shared.clusters[0]?.cluster['certificate-authority'] ?? '';
    certFile = shared.users[0]?.user['client-certificate'] ?? '';
    keyFile = shared.users[0]?.user['client-key'] ?? '';
    expect([server, ca, certFile, keyFile].every((v) => v !== '')).toBe(true);
  });
  afterAll(() => {
    for (const api of opened.splice(0)) api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const forEachLoader = async (kubeconfig: string, check: (who: Who) => void): Promise<void> => {
    for (const l of LOADERS) {
      const who = await l.whoami(kubeconfig).catch((err: unknown) => {
        throw new Error(`${l.name}: ${String(err)}`, { cause: err });
      });
      check(who);
    }
  };

  it('client certificate and key from files, and inline as data', async () => {
    const files = write({ 'client-certificate': certFile, 'client-key': keyFile });
    const data = write(
      {
        'client-certificate-data': readFileSync(certFile).toString('base64'),
        'client-key-data': readFileSync(keyFile).toString('base64'),
      },
      { 'certificate-authority': undefined, 'certificate-authority-data': readFileSync(ca).toString('base64') },
    );
    for (const k of [files, data])
      await forEachLoader(k, (who) => {
        expect(who.username).toBe('admin');
        expect(who.groups).toContain('system:masters');
      });
  });

  it('a bearer token, and the oidc auth provider (its id-token is a JWT the API server verifies)', async () => {
    const token = await tokenOf('bearer');
    await forEachLoader(write({ token }), (who) => {
      expect(who.username).toBe(sa('bearer'));
    });
    await forEachLoader(write({ 'auth-provider': { name: 'oidc', config: { 'id-token': token } } }), (who) => {
      expect(who.username).toBe(sa('bearer'));
    });
  });

  it('an exec credential plugin', async () => {
    const token = await tokenOf('exec');
    const out = join(dir, 'exec-credential.json');
    writeFileSync(
      out,
      JSON.stringify({
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        status: { token },
      }),
    );
    const k = write({
      exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'cat', args: [out], interactiveMode: 'Never' },
    });
    await forEachLoader(k, (who) => {
      expect(who.username).toBe(sa('exec'));
    });
  });

  it('a token file that rotates: read again after the reload period (controller, agent), and at once after a 401 (plugin)', async () => {
    const [first, second] = [await tokenOf('first'), await tokenOf('second')];
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, first);
    const k = write({ tokenFile });
    const reloadMs = 1000;
    const controller = track(apiClientFor(k, { reloadMs }));
    const agent = track(agentConnect(k, { reloadMs }));
    const asks = [
      async () => whoFrom(await typedApi(controller, AuthenticationV1Api).createSelfSubjectReview({ body: SSR.body })),
      async () => whoFrom(await agent.request({ method: 'POST', path: SSR.path, body: SSR.body })),
    ];
    for (const ask of asks) expect((await ask()).username).toBe(sa('first'));
    writeFileSync(tokenFile, second);
    await new Promise((r) => setTimeout(r, reloadMs + 50));
    for (const ask of asks) expect((await ask()).username).toBe(sa('second'));

    // The plugin's client keeps the default reload period; a token the server refuses (401) is
    // read again at once.
    writeFileSync(tokenFile, 'a-token-the-server-never-issued');
    const plugin = pluginConnect({ kubeconfig: k, context: undefined, namespace: undefined });
    const ask = async (): Promise<Who> =>
      whoFrom(await plugin.json.request({ method: 'POST', path: SSR.path, body: SSR.body }));
    const refused = await ask().catch((e: unknown) => e);
    expect(httpStatus(refused)).toBe(401);
    writeFileSync(tokenFile, second);
    expect((await ask()).username).toBe(sa('second'));
  });

  it('impersonation (as, as-uid, as-groups, as-user-extra) sent as Impersonate-* headers, allowed and refused by RBAC', async () => {
    const token = await tokenOf('impersonator');
    const role = `fencepost-test-impersonate-${namespace}`;
    await rbac.createClusterRole({
      body: {
        metadata: { name: role },
        rules: [
          { apiGroups: [''], resources: ['users'], verbs: ['impersonate'], resourceNames: ['alice'] },
          { apiGroups: [''], resources: ['groups'], verbs: ['impersonate'], resourceNames: ['dev'] },
          { apiGroups: ['authentication.k8s.io'], resources: ['uids'], verbs: ['impersonate'], resourceNames: ['u-1'] },
          {
            apiGroups: ['authentication.k8s.io'],
            resources: ['userextras/scopes'],
            verbs: ['impersonate'],
            resourceNames: ['a'],
          },
        ],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name: 'impersonator', namespace }],
      },
    });
    try {
      const allowed = write({
        token,
        as: 'alice',
        'as-uid': 'u-1',
        'as-groups': ['dev'],
        'as-user-extra': { scopes: ['a'] },
      });
      await forEachLoader(allowed, (who) => {
        expect(who.username).toBe('alice');
        expect(who.uid).toBe('u-1');
        expect(who.groups).toContain('dev');
        expect(who.extra).toEqual({ scopes: ['a'] });
      });
      // RBAC grants alice only: impersonating bob is refused, in every binary.
      const refused = write({ token, as: 'bob' });
      for (const l of LOADERS) {
        const err = await l.whoami(refused).catch((e: unknown) => e);
        expect(httpStatus(err), l.name).toBe(403);
        expect(said(err), l.name).toContain('cannot impersonate resource \\"users\\"');
      }
    } finally {
      await rbac.deleteClusterRoleBinding({ name: role });
      await rbac.deleteClusterRole({ name: role });
    }
  });

  it('proxy-url: every request goes through the HTTP CONNECT proxy', async () => {
    const targets: string[] = [];
    const tunnels = new Set<Socket>();
    const proxy: Server = createServer((_req, res) => {
      res.statusCode = 405;
      res.end();
    });
    proxy.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
      tunnels.add(client);
      targets.push(req.url ?? '');
      const [host, port] = (req.url ?? '').split(':');
      const upstream = netConnect({ host, port: Number(port) }, () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      tunnels.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const port = (proxy.address() as AddressInfo).port;
      const k = write(
        { 'client-certificate': certFile, 'client-key': keyFile },
        { 'proxy-url': `http://127.0.0.1:${port}` },
      );
      await forEachLoader(k, (who) => {
        expect(who.username).toBe('admin');
      });
      expect(targets).toEqual([new URL(server).host, new URL(server).host, new URL(server).host]);
    } finally {
      for (const t of tunnels) t.destroy();
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('username and password: loaded and sent as HTTP basic, which this API server (like every one since 1.19) does not authenticate', async () => {
    const k = write({ username: 'admin', password: 'secret' });
    for (const l of LOADERS) {
      const err = await l.whoami(k).catch((e: unknown) => e);
      // No authenticator takes basic credentials: the request is anonymous, and anonymous may not ask.
      expect(httpStatus(err), l.name).toBe(403);
      expect(said(err), l.name).toContain('system:anonymous');
    }
  });

  it('an auth provider kubectl removed (gcp) is refused by every loader, naming the field', async () => {
    const k = write({ 'auth-provider': { name: 'gcp' } });
    for (const l of LOADERS)
      await expect(l.whoami(k), l.name).rejects.toThrow(
        'users[u].user.auth-provider.name "gcp": the gcp auth provider was removed from kubectl',
      );
  });
});
