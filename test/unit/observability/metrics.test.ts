import { describe, expect, it } from 'vitest';
import { createControllerMetrics } from '../../../src/observability/metrics.ts';

describe('createControllerMetrics', () => {
  it("registers controller-runtime's and client-go's names and Node's defaults without a prefix", async () => {
    const text = await createControllerMetrics().registry.metrics();
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
    expect(
      Object.fromEntries(
        [
          'controller_runtime_reconcile_total',
          'controller_runtime_reconcile_errors_total',
          'controller_runtime_terminal_reconcile_errors_total',
          'controller_runtime_reconcile_time_seconds',
          'controller_runtime_active_workers',
          'controller_runtime_max_concurrent_reconciles',
          'workqueue_depth',
          'workqueue_adds_total',
          'workqueue_retries_total',
          'workqueue_queue_duration_seconds',
          'workqueue_work_duration_seconds',
          'workqueue_unfinished_work_seconds',
          'workqueue_longest_running_processor_seconds',
          'leader_election_master_status',
          'rest_client_requests_total',
          'process_cpu_seconds_total',
          'nodejs_heap_size_used_bytes',
          'fencepost_grants_total',
          'fencepost_reconcile_errors_total',
        ].map((n) => [n, types.get(n)]),
      ),
    ).toEqual({
      controller_runtime_reconcile_total: 'counter',
      controller_runtime_reconcile_errors_total: 'counter',
      controller_runtime_terminal_reconcile_errors_total: 'counter',
      controller_runtime_reconcile_time_seconds: 'histogram',
      controller_runtime_active_workers: 'gauge',
      controller_runtime_max_concurrent_reconciles: 'gauge',
      workqueue_depth: 'gauge',
      workqueue_adds_total: 'counter',
      workqueue_retries_total: 'counter',
      workqueue_queue_duration_seconds: 'histogram',
      workqueue_work_duration_seconds: 'histogram',
      workqueue_unfinished_work_seconds: 'gauge',
      workqueue_longest_running_processor_seconds: 'gauge',
      leader_election_master_status: 'gauge',
      rest_client_requests_total: 'counter',
      process_cpu_seconds_total: 'counter',
      nodejs_heap_size_used_bytes: 'gauge',
      fencepost_grants_total: 'counter',
      fencepost_reconcile_errors_total: 'counter',
    });
    expect(
      [...types.keys()].filter(
        (n) =>
          n.startsWith('fencepost_process') || n.startsWith('fencepost_nodejs') || n.startsWith('fencepost_workqueue'),
      ),
    ).toEqual([]);
  });

  it('sums the depth and unfinished work of the queues of one name, takes the longest processor, and drops removed queues', async () => {
    const m = createControllerMetrics();
    const removeA = m.addWorkQueueSource('q', () => ({ depthKeys: 2, unfinishedMs: 1500, longestMs: 1000 }));
    m.addWorkQueueSource('q', () => ({ depthKeys: 3, unfinishedMs: 500, longestMs: 2500 }));
    const value = async (name: string): Promise<string | undefined> =>
      new RegExp(`^${name}\\{name="q",controller="q"\\} (\\S+)$`, 'm').exec(await m.registry.metrics())?.[1];
    expect([
      await value('workqueue_depth'),
      await value('workqueue_unfinished_work_seconds'),
      await value('workqueue_longest_running_processor_seconds'),
    ]).toEqual(['5', '2', '2.5']);
    removeA();
    expect(await value('workqueue_depth')).toBe('3');
  });

  it('counts REST requests by code, method and host', async () => {
    const m = createControllerMetrics();
    m.countRestRequest({ code: '200', method: 'GET', host: '10.0.0.1:6443' });
    m.countRestRequest({ code: '200', method: 'GET', host: '10.0.0.1:6443' });
    m.countRestRequest({ code: '<error>', method: 'PUT', host: '10.0.0.1:6443' });
    const text = await m.registry.metrics();
    expect(text).toMatch(/^rest_client_requests_total\{code="200",method="GET",host="10\.0\.0\.1:6443"\} 2$/m);
    expect(text).toMatch(/^rest_client_requests_total\{code="<error>",method="PUT",host="10\.0\.0\.1:6443"\} 1$/m);
  });
});
