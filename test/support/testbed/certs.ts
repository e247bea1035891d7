/**
 * Certificates for the test control plane, made with Debian's openssl: one CA (ECDSA P-256) that
 * signs the API server's serving certificate (for 127.0.0.1 and localhost) and client
 * certificates (the admin is in group system:masters), plus the service-account signing key.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Pki names the files of a control plane's certificates. */
export interface Pki {
  readonly dir: string;
  readonly caCert: string;
  readonly caKey: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly adminCert: string;
  readonly adminKey: string;
  readonly saKey: string;
  readonly saPub: string;
}

function openssl(args: readonly string[]): void {
  try {
    execFileSync('openssl', [...args], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0] ?? ''} failed: ${stderr.trim()}`, { cause: err });
  }
}

function ecKey(path: string): void {
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path]);
}

/**
 * issueClientCert signs a client certificate for user `cn` in `groups` with the CA in dir, and
 * returns its cert and key paths. Kubernetes reads the user from CN and the groups from O.
 */
export function issueClientCert(pki: Pki, cn: string, groups: readonly string[]): { cert: string; key: string } {
  const base = join(pki.dir, `client-${cn.replace(/[^a-zA-Z0-9.-]/g, '_')}`);
  const key = `${base}.key`;
  const cert = `${base}.crt`;
  if (existsSync(cert)) return { cert, key };
  ecKey(key);
  const subj = `/CN=${cn}${groups.map((g) => `/O=${g}`).join('')}`;
  openssl(['req', '-new', '-key', key, '-subj', subj, '-out', `${base}.csr`]);
  writeFileSync(`${base}.ext`, 'keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n');
  openssl([
    'x509',
    '-req',
    '-in',
    `${base}.csr`,
    '-CA',
    pki.caCert,
    '-CAkey',
    pki.caKey,
    '-CAcreateserial',
    '-days',
    '30',
    '-extfile',
    `${base}.ext`,
    '-out',
    cert,
  ]);
  return { cert, key };
}

/** ensurePki creates the certificates in dir unless they are already there (restarts reuse them). */
export function ensurePki(dir: string): Pki {
  const p = (f: string): string => join(dir, f);
  const pki: Pki = {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    serverCert: p('apiserver.crt'),
    serverKey: p('apiserver.key'),
    adminCert: p('client-admin.crt'),
    adminKey: p('client-admin.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
  };
  if (existsSync(pki.adminCert)) return pki;
  mkdirSync(dir, { recursive: true });
  ecKey(pki.caKey);
  openssl([
    'req',
    '-x509',
    '-new',
    '-key',
    pki.caKey,
    '-subj',
    '/CN=fencepost-testbed-ca',
    '-days',
    '30',
    '-out',
    pki.caCert,
  ]);
  ecKey(pki.serverKey);
  openssl(['req', '-new', '-key', pki.serverKey, '-subj', '/CN=kube-apiserver', '-out', p('apiserver.csr')]);
  // 10.0.2.2: the host's loopback as a crun-run pod sees it (slirp4netns; test/support/cluster/sandbox.ts),
  // its KUBERNETES_SERVICE_HOST; in-cluster config verifies the server by that address. 10.0.0.1:
  // the `kubernetes` Service, which a real node's pods use (test/support/node/node.ts forwards it).
  writeFileSync(
    p('apiserver.ext'),
    'subjectAltName=IP:127.0.0.1,IP:10.0.2.2,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' +
      'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n',
  );
  openssl([
    'x509',
    '-req',
    '-in',
    p('apiserver.csr'),
    '-CA',
    pki.caCert,
    '-CAkey',
    pki.caKey,
    '-CAcreateserial',
    '-days',
    '30',
    '-extfile',
    p('apiserver.ext'),
    '-out',
    pki.serverCert,
  ]);
  ecKey(pki.saKey);
  openssl(['pkey', '-in', pki.saKey, '-pubout', '-out', pki.saPub]);
  issueClientCert(pki, 'admin', ['system:masters']);
  return pki;
}
