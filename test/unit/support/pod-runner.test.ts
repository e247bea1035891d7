import { describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import {
  expandVars,
  isFencepostImage,
  isScriptImage,
  listenPorts,
  podPortsOf,
  rewriteAddresses,
  rewriteHostLoopback,
  scriptInterpreter,
  rewriteLoopbackPorts,
  terminationPrereqs,
} from '../../support/cluster/pod-runner.ts';

// The pure parts of the e2e pod runner: which containers it runs, how it expands $(VAR) as the
// kubelet does, and how it moves listen addresses to free loopback ports.
describe('the pod runner', () => {
  it.each([
    ['fencepost', true],
    ['fencepost:e2e', true],
    ['ghcr.io/fencepost/fencepost:0.1.0', true],
    ['registry:5000/fencepost@sha256:abc', true],
    ['fencepost-tools:1', false],
    ['example.invalid/app:1', false],
    ['', false],
  ])("treats image %j as fencepost's: %s", (image, expected) => {
    expect(isFencepostImage(image)).toBe(expected);
  });

  it('expands $(VAR) from the env, keeps unknown names and turns $$ into $', () => {
    expect(expandVars('--run-id=$(RUN_ID)', { RUN_ID: 'job-1' })).toBe('--run-id=job-1');
    expect(expandVars('$(MISSING) $$(RUN_ID)', { RUN_ID: 'x' })).toBe('$(MISSING) $(RUN_ID)');
  });

  it("moves listen flags in both spellings to new ports, and adds the command's defaults", async () => {
    const ports = [41001, 41004, 41005, 41002, 41003];
    const next = (): Promise<number> => Promise.resolve(ports.shift() ?? 0);
    const agent = await rewriteAddresses(['agent', '--lock', 'x'], next);
    expect(agent.args).toEqual([
      'agent',
      '--lock',
      'x',
      '--listen=127.0.0.1:41001',
      '--metrics-bind-address=127.0.0.1:41004',
      '--health-probe-bind-address=127.0.0.1:41005',
    ]);
    expect([...agent.ports]).toEqual([
      [7370, 41001],
      [7372, 41004],
      [7371, 41005],
    ]);
    const controller = await rewriteAddresses(
      ['controller', '--metrics-bind-address=0.0.0.0:8080', '--health-probe-bind-address', '0.0.0.0:8081'],
      next,
    );
    expect(controller.args).toEqual([
      'controller',
      '--metrics-bind-address=127.0.0.1:41002',
      '--health-probe-bind-address',
      '127.0.0.1:41003',
    ]);
    expect([...controller.ports]).toEqual([
      [8080, 41002],
      [8081, 41003],
    ]);
  });

  it("moves the dashboard's --address (the chart's, or its default) to a new loopback port", async () => {
    const ports = [41010, 41011];
    const next = (): Promise<number> => Promise.resolve(ports.shift() ?? 0);
    const chart = await rewriteAddresses(['dashboard', '--address=0.0.0.0:8300', '--allow-remote'], next);
    expect(chart.args).toEqual(['dashboard', '--address=127.0.0.1:41010', '--allow-remote']);
    expect([...chart.ports]).toEqual([[8300, 41010]]);
    const bare = await rewriteAddresses(['dashboard'], next);
    expect(bare.args).toEqual(['dashboard', '--address=127.0.0.1:41011']);
    expect(listenPorts(['dashboard', '--address', '127.0.0.1:9000'])).toEqual([9000]);
  });

  it('leaves a disabled listener (port 0) and other commands alone', async () => {
    const r = await rewriteAddresses(['controller', '--metrics-bind-address=0', '--health-probe-bind-address=0'], () =>
      Promise.reject(new Error('no port needed')),
    );
    expect(r.args).toEqual(['controller', '--metrics-bind-address=0', '--health-probe-bind-address=0']);
    expect(
      (await rewriteAddresses(['exec', '--lock', 'x', '--', 'sh'], () => Promise.reject(new Error('no port needed'))))
        .args,
    ).toEqual(['exec', '--lock', 'x', '--', 'sh']);
  });

  it.each([
    ['node', true],
    ['node:24-slim', true],
    ['docker.io/library/node:24', true],
    ['nodejs:1', false],
    ['fencepost', false],
  ])('runs image %j as a node script: %s', (image, expected) => {
    expect(isScriptImage(image)).toBe(expected);
  });

  it.each([
    [{ image: 'node:24-slim', command: ['node', '-e', 'x'] }, process.execPath],
    [{ image: 'curlimages/curl:8.11.1', command: ['sh', '-c', 'x'] }, 'sh'],
    [{ image: 'curl', command: ['sh', '-ec', 'x'] }, 'sh'],
    [{ image: 'curlimages/curl:8.11.1', command: ['curl', '-s', 'x'] }, undefined],
    [{ image: 'node:24', command: ['sh', '-c', 'x'] }, undefined],
    [{ image: 'registry.example.com/app:1', command: ['sh', '-c', 'x'] }, undefined],
  ])('runs %j with the local %s', (c, expected) => {
    expect(scriptInterpreter(c)).toBe(expected);
  });

  it("points loopback addresses at the local ports of the pod's containers, and leaves other ports alone", () => {
    const ports = new Map([
      [7370, 41001],
      [8081, 41002],
    ]);
    expect(rewriteLoopbackPorts('http://127.0.0.1:7370/v1/locks/a', ports)).toBe('http://127.0.0.1:41001/v1/locks/a');
    expect(rewriteLoopbackPorts('localhost:8081 localhost:9999 10.0.0.1:7370', ports)).toBe(
      'localhost:41002 localhost:9999 10.0.0.1:7370',
    );
  });

  // The kubelet's newTerminationOrdering (pkg/kubelet/kuberuntime/kuberuntime_termination_order.go).
  it('stops main containers first, then each sidecar after the sidecars defined after it', () => {
    const pod: V1Pod = {
      spec: {
        initContainers: [
          { name: 'mesh', restartPolicy: 'Always' },
          { name: 'migrate' },
          { name: 'fencepost-agent', restartPolicy: 'Always' },
        ],
        containers: [{ name: 'app' }, { name: 'worker' }],
      },
    };
    expect(Object.fromEntries(terminationPrereqs(pod))).toEqual({
      app: [],
      worker: [],
      'fencepost-agent': ['app', 'worker'],
      mesh: ['app', 'worker', 'fencepost-agent'],
    });
  });

  // crun mode: the pod has its own loopback; nothing moves, host services are at 10.0.2.2.
  it("lists a fencepost command's listen ports, its defaults included and disabled ones left out", () => {
    expect(listenPorts(['agent', '--listen=127.0.0.1:7370', '--health-probe-bind-address', ':9091'])).toEqual([
      7370, 9091, 7372,
    ]);
    expect(listenPorts(['controller', '--metrics-bind-address=0'])).toEqual([8081]);
    expect(listenPorts(['version'])).toEqual([]);
  });

  it("points loopback addresses at the host's gateway unless the port is one of the pod's", () => {
    const pod = new Set([7370, 8080]);
    expect(rewriteHostLoopback('redis://127.0.0.1:6379/0', pod)).toBe('redis://10.0.2.2:6379/0');
    expect(rewriteHostLoopback('http://localhost:7370 and 127.0.0.1:8080', pod)).toBe(
      'http://localhost:7370 and 127.0.0.1:8080',
    );
    expect(rewriteHostLoopback('"server":"https://127.0.0.1:6443"', pod)).toBe('"server":"https://10.0.2.2:6443"');
  });

  it("takes a pod's ports from its declared containerPorts and its fencepost containers' listen flags", () => {
    const pod: V1Pod = {
      spec: {
        initContainers: [
          {
            name: 'fencepost-agent',
            image: 'ghcr.io/fencepost/fencepost:0.1.0',
            command: ['/app/bin/fencepost-agent'],
            args: ['agent', '--listen=127.0.0.1:7370', '--health-probe-bind-address=:7371'],
          },
        ],
        containers: [{ name: 'app', image: 'example/app:1', ports: [{ containerPort: 9000 }] }],
      },
    };
    expect([...podPortsOf(pod)].sort((a, b) => a - b)).toEqual([7370, 7371, 7372, 9000]);
  });
});
