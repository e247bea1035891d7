/**
 * The one definition of client-go's `rest_client_requests_total`, which the controller (prom-client,
 * metrics.ts) and the agent (exposition.ts, no prom-client) both export: one name, help and label
 * set, so a dashboard query works on either. Kept apart from metrics.ts so that the agent's bundle
 * does not pull prom-client in to read three strings.
 */
export const REST_REQUESTS_METRIC = {
  name: 'rest_client_requests_total',
  help: 'HTTP requests to the API server by status code (<error> when none came), method and host.',
  labelNames: ['code', 'method', 'host'],
} as const;
