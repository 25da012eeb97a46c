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
