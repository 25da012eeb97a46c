// The clients' process (see load-clients.ts): tsx's loader first, then the TypeScript module.
import { register } from 'tsx/esm/api';

register();
await import('./load-clients-process.ts');
