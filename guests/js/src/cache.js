/**
 * Reads from the host's informer cache.
 *
 * Reads never reach the API server and only cover the kinds the controller declared (primary,
 * owned and watched). Cached objects have `metadata.managedFields` stripped.
 */

import { call, parseJson } from "./errors.js";
import { cache } from "./host.js";

/**
 * The object `namespace/name` of `kind`, or `undefined` if the cache does not hold it.
 * `namespace` is `undefined` for a cluster-scoped kind. Throws a `HostError`.
 * @param {import("./kinds.js").Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @returns {any}
 */
export function get(kind, namespace, name) {
  const text = call(() => cache.get(kind, namespace ?? undefined, name));
  return text === undefined ? undefined : parseJson(text);
}

/**
 * Every cached object of `kind` in `namespace` (`undefined`: all namespaces), optionally only
 * those matching `labelSelector` in the API server's syntax (`app=web,tier in (a,b),!legacy`).
 * Ordered by namespace, then name. Throws a `HostError`.
 * @param {import("./kinds.js").Gvk} kind
 * @param {string} [namespace]
 * @param {string} [labelSelector]
 * @returns {any[]}
 */
export function list(kind, namespace, labelSelector) {
  return call(() => cache.list(kind, namespace ?? undefined, labelSelector ?? undefined)).map(
    parseJson,
  );
}

/**
 * Every cached object of `kind` in `namespace` (`undefined`: all namespaces) whose controller
 * reference (the `ownerReferences` entry with `controller: true`) has the uid `controllerUid`:
 * the objects that owner controls, e.g. the pods of a ReplicaSet. Objects that merely list the
 * owner among other owners are not included. Ordered by namespace, then name. Served from the
 * host's index, so it costs the objects found, however many others the namespace holds. Throws
 * a `HostError`.
 * @param {import("./kinds.js").Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} controllerUid
 * @returns {any[]}
 */
export function listControlled(kind, namespace, controllerUid) {
  return call(() => cache.listControlled(kind, namespace ?? undefined, controllerUid)).map(
    parseJson,
  );
}
