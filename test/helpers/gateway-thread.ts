/**
 * Tests run the TypeScript sources, and a worker thread starts without vitest's loader: the gateway threads of a
 * test process run this shim, which registers tsx and then loads the thread's real entry (production runs the
 * compiled thread-main.js itself).
 */
export const GATEWAY_THREAD_ENTRY = new URL('./gateway-thread-entry.mjs', import.meta.url);
