/** The METRICS_TOKEN of the servers the tests start that read /metrics on the API port. */
export const TEST_METRICS_TOKEN = 'test-metrics-token-0123456789';
