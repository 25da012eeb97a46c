// The mock gateways' process (see mock-gateways.ts): tsx's loader first, then the TypeScript module.
import { register } from 'tsx/esm/api';

register();
await import('./mock-gateways-process.ts');
