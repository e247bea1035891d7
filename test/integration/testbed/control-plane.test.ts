import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationV1Api, CoordinationV1Api, CoreV1Api, VersionApi } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../support/testbed/control-plane.ts';
import { KUBE_VERSION } from '../../support/testbed/assets.ts';

// A control plane of this file's own, because it stops and restarts the API server.
describe('the test control plane', () => {
  let plane: ControlPlane;
  beforeAll(async () => {
    plane = await startControlPlane();
  });
  afterAll(async () => {
    await plane?.stop();
  });

  it('is the pinned, version-stamped Kubernetes release', async () => {
    const v = await plane.kubeConfig().makeApiClient(VersionApi).getCode();
    expect(v.gitVersion).toBe(KUBE_VERSION);
  });

  it('issues ServiceAccount tokens that authenticate as a non-admin identity under RBAC', async () => {
    const ns = await plane.createNamespace();
    const agent = await plane.serviceAccountConfig(ns, 'agent');
    const review = await agent.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${ns}:agent`);
    // No RoleBinding yet: RBAC denies it.
    await expect(agent.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: ns })).rejects.toMatchObject({
      code: 403,
    });
    // Client-certificate users, too.
    const user = plane.userConfig('alice', ['team-a']);
    const me = await user.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(me.status?.userInfo?.groups).toContain('team-a');
  });

  it('stops and restarts the API server on the same address, keeping what etcd stored', async () => {
    const core = plane.kubeConfig().makeApiClient(CoreV1Api);
    const ns = await plane.createNamespace('restart-');
    const oldPid = plane.apiServer.process().pid;
    await plane.apiServer.stop();
    await expect(core.readNamespace({ name: ns })).rejects.toThrow();
    await plane.apiServer.start();
    expect(plane.apiServer.process().pid).not.toBe(oldPid);
    const back = await core.readNamespace({ name: ns });
    expect(back.metadata?.name).toBe(ns);
  });
});
