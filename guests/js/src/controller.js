/**
 * The controller an author writes, and the adapter that exports it as the component's `guest`
 * interface.
 */

import { HostError, PermanentError, ReconcileError } from "./errors.js";
import { Metadata, formatGvk } from "./kinds.js";
import * as log from "./log.js";

/**
 * @typedef {import("./kinds.js").Gvk} Gvk
 * @typedef {import("./kinds.js").ObjectKey} ObjectKey
 * @typedef {import("kubewasm:controller/types@0.2.1").Reason} Reason why a key was queued:
 *   `added`, `changed`, `deleted`, `owned-changed`, `watched-changed`, `resync`, `requeue` or
 *   `reload`
 *
 * @typedef {object} Request One reconcile request, with the primary object already parsed.
 * @property {ObjectKey} key namespace and name of the primary object
 * @property {string | undefined} namespace `key.namespace`; `undefined` for a cluster-scoped kind
 * @property {string} name `key.name`
 * @property {Reason} reason why the key was queued (the first reason wins)
 * @property {number} attempt 1 on the first try, counting up while reconciles keep failing
 * @property {any} object the primary object as the cache holds it now (without
 *   `metadata.managedFields`), or `undefined` when it no longer exists
 *
 * @typedef {undefined | {requeueAfter: number}} Action How a successful reconcile ends:
 *   `undefined` (nothing more to do until the next change) or {@link requeueAfter}.
 *
 * @typedef {object} Controller
 * @property {Metadata | (() => Metadata)} metadata the declaration (a {@link Metadata} or the
 *   WIT `controller-metadata` record, whose `reconcileOn` defaults to `{any: true}`), read once
 *   when the module is loaded; must not depend on anything but the module
 * @property {(request: Request) => Action | void} reconcile brings the world in line with the
 *   primary object; throws to fail (see `ReconcileError.from`)
 * @property {(request: Request) => Action | void} [finalize] cleans up before a primary object
 *   carrying the finalizer is deleted; the host removes the finalizer once it returns done.
 *   Default: done.
 * @property {(kind: Gvk, object: any) => ObjectKey[]} [mapKeys] maps a changed object of a kind
 *   watched with `Mapping.guest` to the primary keys to reconcile. Default: none.
 */

/**
 * Reconcile this key again after `milliseconds`.
 * @param {number} milliseconds
 * @returns {Action}
 */
export function requeueAfter(milliseconds) {
  return { requeueAfter: milliseconds };
}

/**
 * The component's `guest` export for `controller`; the guest's entry module exports it under
 * that name:
 *
 * ```js
 * export const guest = defineController({ metadata: ..., reconcile(request) { ... } });
 * ```
 *
 * Every call runs in a fresh instance: nothing (module variables, caches, counters) survives
 * from one call to the next. Functions must be synchronous.
 *
 * @param {Controller} controller
 */
export function defineController(controller) {
  const { reconcile, finalize = () => undefined, mapKeys = () => [] } = controller;
  return {
    /** @returns {import("kubewasm:controller/types@0.2.1").ControllerMetadata} */
    metadata() {
      const metadata =
        typeof controller.metadata === "function" ? controller.metadata() : controller.metadata;
      if (metadata instanceof Metadata) {
        return metadata.toWit();
      }
      const record = /** @type {any} */ (metadata);
      return { ...record, reconcileOn: record.reconcileOn ?? { any: true } };
    },
    /** @param {any} raw */
    reconcile(raw) {
      return run(raw, reconcile);
    },
    /** @param {any} raw */
    finalize(raw) {
      return run(raw, finalize);
    },
    /**
     * @param {Gvk} kind
     * @param {string} text
     */
    mapKeys(kind, text) {
      let object;
      try {
        object = JSON.parse(text);
      } catch (error) {
        log.warn("map-keys received an object that is not JSON", {
          kind: formatGvk(kind),
          error,
        });
        return [];
      }
      try {
        return mapKeys(kind, object).map(({ namespace, name }) => ({
          namespace: namespace ?? undefined,
          name,
        }));
      } catch (error) {
        log.error("map-keys failed", { kind: formatGvk(kind), error: describe(error) });
        return [];
      }
    },
  };
}

/**
 * Calls `handler` with the parsed request and returns the WIT outcome; a thrown error becomes
 * the WIT `reconcile-error`, which the bindings return as the `err` case of the result.
 * @param {any} raw the WIT `request` record
 * @param {(request: Request) => Action | void} handler
 */
function run(raw, handler) {
  try {
    return outcome(handler(request(raw)));
  } catch (error) {
    if (!(error instanceof ReconcileError || error instanceof HostError)) {
      log.error("uncaught exception", { error: describe(error) });
    }
    throw { payload: ReconcileError.from(error).toWit() };
  }
}

/**
 * An exception with its stack, for the log.
 * @param {unknown} error
 */
function describe(error) {
  return error instanceof Error
    ? `${error.name}: ${error.message}\n${error.stack ?? ""}`
    : String(error);
}

/**
 * @param {any} raw the WIT `request` record
 * @returns {Request}
 */
function request(raw) {
  let object;
  if (raw.object !== undefined && raw.object !== null) {
    try {
      object = JSON.parse(raw.object);
    } catch (error) {
      const reason = /** @type {SyntaxError} */ (error).message;
      throw new PermanentError(`primary object is not JSON: ${reason}`);
    }
  }
  const key = { namespace: raw.key.namespace ?? undefined, name: raw.key.name };
  return {
    key,
    namespace: key.namespace,
    name: key.name,
    reason: raw.reason,
    attempt: raw.attempt,
    object,
  };
}

/**
 * @param {Action | void} action
 */
function outcome(action) {
  if (action === undefined || action === null) {
    return { tag: "done" };
  }
  const delay = Math.max(0, Math.ceil(action.requeueAfter));
  if (!Number.isFinite(delay)) {
    throw new PermanentError(
      `requeueAfter needs a number of milliseconds, not ${action.requeueAfter}`,
    );
  }
  return { tag: "requeue-after", val: BigInt(delay) };
}
