/** Fake nodes for kwok: Node objects that kwok marks Ready and keeps alive with heartbeat Leases. */
import { CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';

/** KWOK_NODE_LABEL marks the fake nodes (kwok's own convention). */
export const KWOK_NODE_LABEL = 'type';

/** fakeNode is a Node with room for many pods, labelled and annotated the way kwok's docs do. */
export function fakeNode(name: string): V1Node {
  const capacity = { cpu: '32', memory: '256Gi', pods: '110' };
  return {
    metadata: {
      name,
      labels: {
        [KWOK_NODE_LABEL]: 'kwok',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      },
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: {},
    status: { allocatable: capacity, capacity },
  };
}

/** createNodes creates count fake nodes named `<prefix>-<i>` (existing ones are kept). */
export async function createNodes(kc: KubeConfig, count: number, prefix = 'kwok-node'): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i}`;
    try {
      await core.createNode({ body: fakeNode(name) });
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
    }
    names.push(name);
  }
  return names;
}

/** waitNodesReady waits until every named node reports Ready=True (kwok's node-initialize stage). */
export async function waitNodesReady(kc: KubeConfig, names: readonly string[], timeoutMs = 60_000): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const nodes = await core.listNode();
    const ready = new Set(
      nodes.items
        .filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
        .map((n) => n.metadata?.name),
    );
    if (names.every((n) => ready.has(n))) return;
    if (performance.now() > deadline)
      throw new Error(`nodes not Ready after ${timeoutMs} ms: ${names.filter((n) => !ready.has(n)).join(', ')}`);
    await sleep(200);
  }
}
