import { pino, type Logger } from 'pino';

/** Paths that may carry secrets; pino replaces them before a line is written. */
export const redactPaths = [
  'req.headers.authorization',
  'headers.authorization',
  '*.password',
  '*.key',
  '*.privateKey',
  '*.keyPem',
  '*.apns_credentials',
  '*.fcm_credentials',
  '*.hms_credentials',
  '*.client_secret',
  '*.private_key',
  '*.apiKey',
  'apns.key',
  'fcm.private_key',
];

/** JSON lines on stdout (the server's log stream), or on stderr where stdout carries a program's answer (the CLI). */
export function createLogger(level: string, to: 'stdout' | 'stderr' = 'stdout'): Logger {
  const options = { level, redact: { paths: redactPaths, censor: '[redacted]' } };
  return to === 'stdout' ? pino(options) : pino(options, pino.destination(2));
}

export type { Logger };
