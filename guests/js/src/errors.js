/**
 * Errors of host calls ({@link HostError}) and of reconciles ({@link ReconcileError}).
 *
 * A reconcile ends in a transient error (retried with backoff) or a permanent one (waits for the
 * next change). Whatever a reconcile throws is turned into one of them by
 * {@link ReconcileError.from}: a `HostError` by {@link HostError#isTransient}, a
 * `ReconcileError` as it is, anything else (a bug: `TypeError`, ...) as transient.
 */

/** HTTP statuses that describe a bad request: retrying the same call cannot succeed. */
const BAD_REQUEST = new Set([400, 405, 406, 413, 415, 422]);

/**
 * Why a host call (cache read, write, event) failed.
 *
 * `kind` is `"api"` (the API server refused; `status` holds `{code, reason, message}`),
 * `"denied"` (the kind, verb or namespace is not declared or not granted), `"invalid"` (a
 * malformed request), `"unavailable"` (the API server could not be reached in time) or `"json"`
 * (a document the host returned is not JSON).
 */
export class HostError extends Error {
  /**
   * @param {"api" | "denied" | "invalid" | "unavailable" | "json"} kind
   * @param {string} message
   * @param {{code: number, reason: string, message: string}} [status] for `kind === "api"`
   */
  constructor(kind, message, status) {
    super(message);
    this.name = "HostError";
    this.kind = kind;
    this.status = status;
  }

  /**
   * The error of a WIT `error` variant (`{tag, val}`), as thrown by a host call.
   * @param {{tag: string, val: any}} error
   */
  static fromWit(error) {
    switch (error.tag) {
      case "api": {
        const { code, reason, message } = error.val;
        return new HostError("api", `API server answered ${code} ${reason}: ${message}`, {
          code,
          reason,
          message,
        });
      }
      case "denied":
        return new HostError("denied", `denied: ${error.val}`);
      case "invalid":
        return new HostError("invalid", `invalid request: ${error.val}`);
      case "unavailable":
        return new HostError("unavailable", `API server unavailable: ${error.val}`);
      default:
        return new HostError("invalid", `unknown host error ${JSON.stringify(error)}`);
    }
  }

  /** The HTTP status code of an `api` error, else `undefined`. */
  get code() {
    return this.status?.code;
  }

  /** The API server answered 404: the object (or its namespace) does not exist. */
  get isNotFound() {
    return this.code === 404;
  }

  /**
   * The API server answered 409: a conflicting write, a failed precondition (uid /
   * resourceVersion) or an object that already exists.
   */
  get isConflict() {
    return this.code === 409;
  }

  /**
   * The API server answered 409 `AlreadyExists`: the object exists, or an owned `apply` was
   * refused because the object exists and the reconciled object does not control it (see the
   * `adopt` option of `apply`).
   */
  get isAlreadyExists() {
    return this.code === 409 && this.status?.reason === "AlreadyExists";
  }

  /**
   * Whether retrying the same call later may succeed: `false` for `denied`, `invalid`, `json`
   * and API statuses of a bad request (400, 405, 406, 413, 415, 422); `true` otherwise.
   */
  get isTransient() {
    switch (this.kind) {
      case "api":
        return !BAD_REQUEST.has(this.code ?? 0);
      case "unavailable":
        return true;
      default:
        return false;
    }
  }
}

/**
 * Calls `hostCall` and rethrows the WIT error it throws as a {@link HostError}.
 * @template T
 * @param {() => T} hostCall
 * @returns {T}
 */
export function call(hostCall) {
  try {
    return hostCall();
  } catch (error) {
    if (error && typeof error === "object" && "payload" in error) {
      throw HostError.fromWit(/** @type {{tag: string, val: any}} */ (error.payload));
    }
    throw error;
  }
}

/**
 * Parses JSON the host returned; a malformed document is a `json` {@link HostError}.
 * @param {string} text
 */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HostError("json", `JSON: ${/** @type {SyntaxError} */ (error).message}`);
  }
}

/**
 * Runs `fn` and returns its result, or `undefined` if it throws a 404 {@link HostError}:
 * `ignoreNotFound(() => deleteObject(pods, ns, name))`.
 * @template T
 * @param {() => T} fn
 * @returns {T | undefined}
 */
export function ignoreNotFound(fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof HostError && error.isNotFound) {
      return undefined;
    }
    throw error;
  }
}

/** How a reconcile fails; throw a {@link TransientError} or a {@link PermanentError}. */
export class ReconcileError extends Error {
  /**
   * @param {boolean} transient whether the host retries with backoff
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(transient, message, options) {
    super(message, options);
    this.name = transient ? "TransientError" : "PermanentError";
    this.transient = transient;
  }

  /**
   * The reconcile error of whatever was thrown, with `context: ` prepended to its message
   * when given: a {@link HostError} by {@link HostError#isTransient}, a `ReconcileError` keeps
   * its kind, anything else is transient.
   * @param {unknown} error
   * @param {string} [context]
   * @returns {ReconcileError}
   */
  static from(error, context) {
    const prefix = context ? `${context}: ` : "";
    if (error instanceof ReconcileError) {
      return context ? reconcileError(error.transient, prefix + error.message, error) : error;
    }
    if (error instanceof HostError) {
      return reconcileError(error.isTransient, prefix + error.message, error);
    }
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return reconcileError(true, prefix + message, error);
  }

  /** The WIT `reconcile-error` variant. */
  toWit() {
    return { tag: this.transient ? "transient" : "permanent", val: this.message };
  }
}

/** A reconcile error the host retries with per-key exponential backoff. */
export class TransientError extends ReconcileError {
  /**
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(message, options) {
    super(true, message, options);
  }
}

/** A reconcile error the host does not retry until the object changes; it is logged and counted. */
export class PermanentError extends ReconcileError {
  /**
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(message, options) {
    super(false, message, options);
  }
}

/**
 * @param {boolean} transient
 * @param {string} message
 * @param {unknown} cause
 */
function reconcileError(transient, message, cause) {
  return transient
    ? new TransientError(message, { cause })
    : new PermanentError(message, { cause });
}
