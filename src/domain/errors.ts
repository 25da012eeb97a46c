/** Typed errors of the domain and the services, each carrying the HTTP status it answers with (src/http/errors.ts sends it). */
export class DomainError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends DomainError {
  constructor(message: string) {
    super(message, 400);
  }
}

export class NotFoundError extends DomainError {
  constructor(what: string) {
    super(`${what} not found`, 404);
  }
}

export class UnauthorizedError extends DomainError {
  constructor() {
    super('unauthorized', 401);
  }
}

export class ForbiddenError extends DomainError {
  constructor() {
    super('your api client does not have the correct roles', 403);
  }
}

/**
 * A claim the caller's key may make only with proof, made without it: an sdk key binding a device to a user id or an
 * e-mail address without its identity hash (src/domain/identity.ts). The message names the missing or wrong field.
 */
export class IdentityNotProvenError extends DomainError {
  constructor(message: string) {
    super(message, 403);
  }
}

/** The device was erased; the public API answers 451 to any later change. */
export class ErasedError extends DomainError {
  constructor() {
    super('device has been erased', 451);
  }
}

export class ConflictError extends DomainError {
  constructor(message: string) {
    super(message, 409);
  }
}

/** A well-formed request the server will not process as sent (an Idempotency-Key reused with another request). */
export class UnprocessableError extends DomainError {
  constructor(message: string) {
    super(message, 422);
  }
}

/** SQLSTATEs that say the server cannot serve now (not that the statement is wrong): a failover or a restart. */
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown: the server is stopping (a switchover, a restart)
  '57P02', // crash_shutdown: another backend crashed and the server resets
  '57P03', // cannot_connect_now: starting up or shutting down
  '25006', // read_only_sql_transaction: a write reached a primary that was just demoted
  '53300', // too_many_connections: a new primary flooded by every pool reconnecting at once
]);

/** Errors of the socket or of pg's client that mean the connection, not the statement, failed. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** A connection the process could not open for want of file descriptors: it can once others close. */
const NO_DESCRIPTOR_CODES = new Set(['EMFILE', 'ENFILE']);
const CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect/,
  /^Client has encountered a connection error and is not queryable/,
  /^Client was closed and is not queryable/,
  /^Query read timeout/,
];

/**
 * Whether `err` says the database cannot be reached or cannot take writes right now (a failover, a restart, a lost
 * connection): what a client should retry after a moment, answered 503, never 500. The one place that decides it.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const { code, message, cause, errors } = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') {
    if (
      UNAVAILABLE_STATES.has(code) ||
      (code.length === 5 && code.startsWith('08')) ||
      CONNECTION_CODES.has(code) ||
      NO_DESCRIPTOR_CODES.has(code)
    )
      return true;
  }
  if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => m.test(message))) return true;
  // a connection attempt to every address of a name fails as one AggregateError
  if (Array.isArray(errors) && errors.some((e) => isDatabaseUnavailable(e, depth + 1))) return true;
  return isDatabaseUnavailable(cause, depth + 1);
}
