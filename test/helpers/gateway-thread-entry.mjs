// A gateway thread of a test process: tsx's loader first, then the TypeScript entry (see gateway-thread.ts).
import { register } from 'tsx/esm/api';

register();
await import('../../src/gateways/runtime/thread-main.ts');
