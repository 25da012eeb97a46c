/**
 * Production settings, except the two recovery timers, shortened so that takeovers of a killed worker's jobs and
 * a sweep after a lost queue take seconds instead of minutes; and, below 100k devices, smaller batches: at least
 * 50 of them, so that most are still queued when a fault strikes (as they are in a broadcast of 100k).
 */
export function faultSettings(devices: number) {
  return {
    DELIVERY_CONCURRENCY: 8,
    DELIVERY_BATCH_SIZE: Math.min(2000, Math.max(100, Math.floor(devices / 50))),
    GATEWAY_MAX_IN_FLIGHT: 200,
    JOB_LOCK_MS: 5000,
    SWEEP_AFTER_SECONDS: 5,
  };
}

/**
 * How many pushes a fault may make the pipeline send twice. A worker killed, or cut from Redis or PostgreSQL,
 * before it recorded its batches' results resends them: at most the batches it has in flight, DELIVERY_CONCURRENCY
 * sending and as many more sent and not yet recorded (`LargeBatchTurns`). A GOAWAY makes the
 * APNs client (node-apn) destroy its connection with the streams the gateway was still answering: at most the
 * streams in flight.
 */
export function duplicateBound(settings: ReturnType<typeof faultSettings>, processFaults: number, goaways = 0): number {
  return processFaults * 2 * settings.DELIVERY_CONCURRENCY * settings.DELIVERY_BATCH_SIZE + goaways * settings.GATEWAY_MAX_IN_FLIGHT;
}
