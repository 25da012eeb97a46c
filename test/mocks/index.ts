/** Loopback APNs / FCM (+ Google OAuth) mocks for tests and benchmarks; see README.md here. */
export { ApnsMock, randomApnsToken, type ApnsMockOptions, type RecordedApnsPush, type ApnsAnswerRecord } from './apns-mock.js';
export { FcmMock, randomFcmToken, type FcmMockOptions, type RecordedFcmPush, type FcmAnswerRecord } from './fcm-mock.js';
export { generateApnsKey, generateServiceAccount, type TestApnsKey, type TestServiceAccount } from './credentials.js';
export { FaultPlan, type Fault } from './faults.js';
export { HmsMock, type HmsMockOptions, type RecordedHmsRequest, type HmsAnswerRecord } from './hms-mock.js';
export { WebPushMock, type MockSubscription, type RecordedWebPush } from './web-push-mock.js';
export { TLS_CA_PATH, testCaTrusted } from './tls.js';
