/**
 * demo.ts — `npm run demo`: brings up the testbed (a real API server and Redis on loopback),
 * applies the example lock, and shows it with kubectl. Leaves the testbed running; stop it with
 * `npm run testbed:down`.
 */
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const exportsText = execFileSync(process.execPath, [join(root, 'hack/testbed/up.ts')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const vars = new Map<string, string>();
for (const line of exportsText.split('\n')) {
  const m = /^export (\w+)=(\S+)/.exec(line);
  if (m?.[1] !== undefined && m[2] !== undefined) vars.set(m[1], m[2]);
}
const kubeconfig = vars.get('KUBECONFIG') ?? '';
const path = (vars.get('PATH') ?? '').replace(/:\$PATH$/, '');
const kubectl = (...args: string[]): string =>
  execFileSync(join(path, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });

process.stdout.write(kubectl('apply', '-f', join(root, 'examples/basic-lock.yaml')));
process.stdout.write(kubectl('get', 'dlock', '-o', 'wide'));
process.stdout.write(`\nThe testbed keeps running. To use it by hand:\n\n${exportsText}\n  kubectl get dlock\n\nStop it with: hack/npm run testbed:down\n`);
