/**
 * Errors of host calls ({@link HostError}) and of reconciles ({@link ReconcileError}).
 *
 * A reconcile ends in a transient error (retried with backoff) or a permanent one (waits for the
 * next change). Whatever a reconcile throws is turned into one of them by
 * {@link ReconcileError.from}: a `HostError` by {@link HostError#isTransient}, a
 * `ReconcileError` as it is, anything else (a bug: `TypeError`, ...) as transient.
 */
/**
 * Why a host call (cache read, write, event) failed.
 *
 * `kind` is `"api"` (the API server refused; `status` holds `{code, reason, message}`),
 * `"denied"` (the kind, verb or namespace is not declared or not granted), `"invalid"` (a
 * malformed request), `"unavailable"` (the API server could not be reached in time) or `"json"`
 * (a document the host returned is not JSON).
 */
export declare class HostError extends Error {
    kind: "api" | "denied" | "invalid" | "json" | "unavailable";
    status: {
        code: number;
        reason: string;
        message: string;
    } | undefined;
    /**
     * @param {"api" | "denied" | "invalid" | "unavailable" | "json"} kind
     * @param {string} message
     * @param {{code: number, reason: string, message: string}} [status] for `kind === "api"`
     */
    constructor(kind: "api" | "denied" | "invalid" | "unavailable" | "json", message: string, status?: {
        code: number;
        reason: string;
        message: string;
    });
    /**
     * The error of a WIT `error` variant (`{tag, val}`), as thrown by a host call.
     * @param {{tag: string, val: any}} error
     */
    static fromWit(error: {
        tag: string;
        val: any;
    }): HostError;
    /** The HTTP status code of an `api` error, else `undefined`. */
    get code(): number | undefined;
    /** The API server answered 404: the object (or its namespace) does not exist. */
    get isNotFound(): boolean;
    /**
     * The API server answered 409: a conflicting write, a failed precondition (uid /
     * resourceVersion) or an object that already exists.
     */
    get isConflict(): boolean;
    /**
     * The API server answered 409 `AlreadyExists`: the object exists, or an owned `apply` was
     * refused because the object exists and the reconciled object does not control it (see the
     * `adopt` option of `apply`).
     */
    get isAlreadyExists(): boolean;
    /**
     * Whether retrying the same call later may succeed: `false` for `denied`, `invalid`, `json`
     * and API statuses of a bad request (400, 405, 406, 413, 415, 422); `true` otherwise.
     */
    get isTransient(): boolean;
}
/**
 * Calls `hostCall` and rethrows the WIT error it throws as a {@link HostError}.
 * @template T
 * @param {() => T} hostCall
 * @returns {T}
 */
export declare function call<T>(hostCall: () => T): T;
/**
 * Parses JSON the host returned; a malformed document is a `json` {@link HostError}.
 * @param {string} text
 */
export declare function parseJson(text: string): any;
/**
 * Runs `fn` and returns its result, or `undefined` if it throws a 404 {@link HostError}:
 * `ignoreNotFound(() => deleteObject(pods, ns, name))`.
 * @template T
 * @param {() => T} fn
 * @returns {T | undefined}
 */
export declare function ignoreNotFound<T>(fn: () => T): T | undefined;
/** How a reconcile fails; throw a {@link TransientError} or a {@link PermanentError}. */
export declare class ReconcileError extends Error {
    transient: boolean;
    /**
     * @param {boolean} transient whether the host retries with backoff
     * @param {string} message
     * @param {ErrorOptions} [options]
     */
    constructor(transient: boolean, message: string, options?: ErrorOptions);
    /**
     * The reconcile error of whatever was thrown, with `context: ` prepended to its message
     * when given: a {@link HostError} by {@link HostError#isTransient}, a `ReconcileError` keeps
     * its kind, anything else is transient.
     * @param {unknown} error
     * @param {string} [context]
     * @returns {ReconcileError}
     */
    static from(error: unknown, context?: string): ReconcileError;
    /** The WIT `reconcile-error` variant. */
    toWit(): {
        tag: string;
        val: string;
    };
}
/** A reconcile error the host retries with per-key exponential backoff. */
export declare class TransientError extends ReconcileError {
    /**
     * @param {string} message
     * @param {ErrorOptions} [options]
     */
    constructor(message: string, options?: ErrorOptions);
}
/** A reconcile error the host does not retry until the object changes; it is logged and counted. */
export declare class PermanentError extends ReconcileError {
    /**
     * @param {string} message
     * @param {ErrorOptions} [options]
     */
    constructor(message: string, options?: ErrorOptions);
}
