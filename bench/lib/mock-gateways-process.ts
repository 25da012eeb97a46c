import { startMocks, type GatewayEndpoints, type MockRequest } from './mock-gateways.js';

/** mocksInProcess's child: starts the mocks, sends where they listen, then answers each request in turn. */
const like = process.argv[3] ? (JSON.parse(process.argv[3]) as GatewayEndpoints) : undefined;
const mocks = await startMocks(process.argv[2]!.split(','), like);
process.send!(mocks.endpoints);
process.on('message', (request: MockRequest) => process.send!(mocks.answer(request) ?? null));
process.on('SIGTERM', () => void mocks.close().then(() => process.exit(0)));
