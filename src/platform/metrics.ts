import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one process, served at /metrics. */
export class Metrics {
  readonly registry = new Registry();
  readonly pushes = new Counter({
    name: 'pushd_pushes_total',
    help: 'Pushes by platform and outcome (ok, invalid_token, retry, failed, expired)',
    labelNames: ['platform', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly gatewayLatency = new Histogram({
    name: 'pushd_gateway_send_seconds',
    help: 'Time for a gateway to answer one delivery chunk, by platform',
    labelNames: ['platform'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'pushd_queue_jobs',
    help: 'Jobs in each queue by state',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
  });
  readonly stalledScans = new Counter({
    name: 'pushd_sweeper_scans_total',
    help: 'Scans for stalled notifications this process ran (the one process holding the scan lease runs them)',
    registers: [this.registry],
  });

  readonly requestsInFlight = new Gauge({
    name: 'pushd_http_requests_in_flight',
    help: 'API requests authenticated and read, not yet answered (what MAX_REQUESTS_IN_FLIGHT bounds)',
    registers: [this.registry],
  });
  readonly connectionsDropped = new Counter({
    name: 'pushd_http_connections_dropped_total',
    help: 'Client connections closed unanswered because MAX_CONNECTIONS were open',
    registers: [this.registry],
  });
  readonly requestsShed = new Counter({
    name: 'pushd_http_requests_shed_total',
    help:
      'API requests answered 503 on arrival: MAX_REQUESTS_IN_FLIGHT were in progress, work had waited past ' +
      'MAX_QUEUE_DELAY_MS, or the CPU was saturated past capacity',
    registers: [this.registry],
  });

  // The day partitions of the tables kept by time (src/delivery/retention.ts), as the last maintenance of this process saw them.
  readonly partitions = new Gauge({
    name: 'pushd_partitions',
    help: 'Day partitions of each time-partitioned table',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly partitionOldestKept = new Gauge({
    name: 'pushd_partition_oldest_kept_seconds',
    help: 'Start (Unix seconds) of the oldest day partition kept, by table',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly partitionBytesDropped = new Counter({
    name: 'pushd_partition_dropped_bytes_total',
    help: 'Bytes of the partitions this process dropped past their retention, by table',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'pushd_' });
  }

  /** Reports the share of new API requests admission takes in, as read at each scrape. */
  followAdmission(admission: { share: number }): void {
    new Gauge({
      name: 'pushd_admission_share',
      help: 'The share of new API requests taken in while the CPU is saturated past capacity (1: all; MAX_QUEUE_DELAY_MS)',
      registers: [this.registry],
      collect() {
        this.set(admission.share);
      },
    });
  }

  /** Reports a read replica's state, as read at each scrape (only a process with DATABASE_READ_URL has one). */
  followReadReplica(replica: { lagSeconds: number | null; inUse: boolean }): void {
    new Gauge({
      name: 'pushd_read_replica_lag_seconds',
      help: 'Replay lag of the read replica at its last check (NaN while it does not answer)',
      registers: [this.registry],
      collect() {
        this.set(replica.lagSeconds ?? NaN);
      },
    });
    new Gauge({
      name: 'pushd_read_replica_in_use',
      help: 'Whether reads go to the replica (1) or, with it too far behind or unreachable, to the primary (0)',
      registers: [this.registry],
      collect() {
        this.set(replica.inUse ? 1 : 0);
      },
    });
  }
}
