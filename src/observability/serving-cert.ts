/**
 * The metrics listener's serving certificate: read from a folder (`--metrics-cert-dir`), or a
 * self-signed one made at start.
 *
 * The self-signed certificate is made with node:crypto alone, for the metrics listener
 * when no certificate is mounted (controller-runtime does the same for its secure metrics server).
 * Node can sign and parse certificates (`crypto.sign`, `X509Certificate`) but has no API to build
 * one, and the image has no openssl, so this file writes the few DER structures of an X.509 v3
 * certificate itself: an ECDSA P-256 key, SHA-256 signature, subject and issuer `CN=<name>`,
 * subjectAltName DNS names and IP addresses, key usage digitalSignature, extended key usage
 * serverAuth, basic constraints CA:FALSE.
 *
 * Caveat: nobody trusts it. A scraper either skips verification (what kubebuilder's scaffold
 * ServiceMonitor does) or is given a certificate it trusts (`--metrics-cert-dir`, e.g. from
 * cert-manager); the bearer token is checked either way.
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

/** ServingCertificate is a PEM certificate and its PEM (PKCS#8) private key. */
export interface ServingCertificate {
  readonly cert: string;
  readonly key: string;
}

/** SelfSignedOptions name the certificate and say how long it is valid. */
export interface SelfSignedOptions {
  /** commonName: the subject's and issuer's CN. */
  readonly commonName: string;
  /** hosts: DNS names and IP addresses for subjectAltName (an IP literal becomes an iPAddress). */
  readonly hosts: readonly string[];
  /** now: the start of validity (less one hour of clock skew). Defaults to the wall clock. */
  readonly now?: Date;
  /** validDays: days of validity from `now`. Defaults to 365. */
  readonly validDays?: number;
}

/** selfSignedCertificate makes a new key and a certificate for it signed by itself. */
export function selfSignedCertificate(o: SelfSignedOptions): ServingCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const now = o.now ?? new Date();
  const notBefore = new Date(now.getTime() - 3600_000);
  const notAfter = new Date(now.getTime() + (o.validDays ?? 365) * 86400_000);
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f; // positive
  const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(set(seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(o.commonName, 'utf8')))));
  const altNames = o.hosts.map((h) => (isIP(h) !== 0 ? tlv(0x87, ipBytes(h)) : tlv(0x82, Buffer.from(h, 'ascii'))));
  const extensions = [
    extension('2.5.29.19', true, seq()), // basicConstraints: CA:FALSE (the default, so empty)
    extension('2.5.29.15', true, tlv(0x03, Buffer.from([0x07, 0x80]))), // keyUsage: digitalSignature
    extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))), // extKeyUsage: serverAuth
    ...(altNames.length > 0 ? [extension('2.5.29.17', false, seq(...altNames))] : []),
  ];
  const tbs = seq(
    tlv(0xa0, int(Buffer.from([2]))), // version v3
    int(serial),
    ecdsaWithSha256,
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...extensions)),
  );
  const signature = sign('sha256', tbs, privateKey); // DER Ecdsa-Sig-Value, as X.509 wants it
  const der = seq(tbs, ecdsaWithSha256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${b64.trimEnd()}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));

/** int encodes unsigned big-endian bytes as a DER INTEGER (a leading zero keeps it positive). */
function int(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && ((b[1] ?? 0) & 0x80) === 0) b = b.subarray(1);
  return tlv(0x02, ((b[0] ?? 0) & 0x80) !== 0 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

function oid(dotted: string): Buffer {
  const [a = 0, b = 0, ...rest] = dotted.split('.').map(Number);
  const out = [a * 40 + b];
  for (const v of rest) {
    const groups: number[] = [];
    for (let x = v; ; x = Math.floor(x / 128)) {
      groups.unshift((x & 0x7f) | (groups.length > 0 ? 0x80 : 0));
      if (x < 128) break;
    }
    out.push(...groups);
  }
  return tlv(0x06, Buffer.from(out));
}

/** time: UTCTime until 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
function time(d: Date): Buffer {
  const iso = d
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z'); // YYYYMMDDHHMMSSZ
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii'))
    : tlv(0x18, Buffer.from(iso, 'ascii'));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
}

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  // IPv6: expand "::" and write the eight 16-bit groups.
  const [head = '', tail] = ip.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** CERT_FILE and KEY_FILE are the file names in a certificate folder: a `kubernetes.io/tls` Secret's keys. */
export const CERT_FILE = 'tls.crt';
export const KEY_FILE = 'tls.key';

/**
 * certificateFromDir reads `tls.crt` and `tls.key` of `dir` (a mounted `kubernetes.io/tls` Secret,
 * as cert-manager writes it). Throws naming `flag` and the file when one cannot be read.
 */
export function certificateFromDir(dir: string, flag: string): ServingCertificate {
  const read = (name: string): string => {
    const path = join(dir, name);
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new Error(`${flag} ${dir}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, {
        cause: err,
      });
    }
  };
  return { cert: read(CERT_FILE), key: read(KEY_FILE) };
}
