/**
 * The client-go peer: bench/peers/client-go (a Go program of ours, its own go.mod) built once
 * into ~/.cache/fencepost/bin/client-go-peer-<client-go version>, never into the repository.
 * The version is read from go.mod, so bumping client-go there builds a new binary.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** PEER_DIR is the Go module of the peer. */
export const PEER_DIR = join(import.meta.dirname, 'client-go');

/** clientGoVersion is the k8s.io/client-go version bench/peers/client-go/go.mod requires. */
export function clientGoVersion(): string {
  const mod = readFileSync(join(PEER_DIR, 'go.mod'), 'utf8');
  const v = /^\s*k8s\.io\/client-go\s+(v\S+)/m.exec(mod)?.[1];
  if (v === undefined) throw new Error(`${PEER_DIR}/go.mod requires no k8s.io/client-go`);
  return v;
}

/**
 * ensureClientGoPeer returns the path of the built peer, building it with `go build` first when
 * it is missing (a cold build of client-go takes a few minutes on 2 cores; later runs reuse it).
 * CLIENT_GO_PEER overrides the path (no build).
 */
export function ensureClientGoPeer(log: (msg: string) => void = () => undefined): string {
  const override = process.env['CLIENT_GO_PEER'];
  if (override !== undefined && override !== '') return override;
  const dir = join(homedir(), '.cache/fencepost/bin');
  const bin = join(dir, `client-go-peer-${clientGoVersion()}`);
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  log(`Building the client-go peer into ${bin} (first run only)…`);
  execFileSync('go', ['build', '-o', bin, '.'], { cwd: PEER_DIR, stdio: ['ignore', 'inherit', 'inherit'] });
  return bin;
}
