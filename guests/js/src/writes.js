/**
 * Writes, executed by the host with the field manager `kubewasm-<name>`. Every function throws
 * a `HostError` when the host or the API server refuses.
 */

import { call, parseJson } from "./errors.js";
import { writes } from "./host.js";

/**
 * @typedef {import("./kinds.js").Gvk} Gvk
 * @typedef {{owned?: boolean, force?: boolean, adopt?: boolean}} ApplyOptions
 * @typedef {{force?: boolean}} StatusOptions
 * @typedef {{uid?: string, resourceVersion?: string}} Preconditions
 */

/**
 * Server-side apply of `object`, which must carry `apiVersion`, `kind` and `metadata.name`;
 * `metadata.namespace` defaults to the reconciled object's. Only include the fields this
 * controller manages. Returns the object as the API server holds it afterwards; an apply that
 * would change nothing is not sent.
 *
 * Options default to `owned: true` (the reconciled object becomes the controller owner),
 * `force: true` (conflicting fields are taken over) and `adopt: false`; pass `{owned: false}`
 * for objects outside the reconciled object's owner tree.
 *
 * An owned apply to an existing object that the reconciled object does not control throws a
 * 409 `AlreadyExists` `HostError` (`isAlreadyExists`) and sends nothing, unless `adopt: true`
 * and the object has no controller owner: then the reconciled object takes control of it. An
 * object controlled by another owner is never taken over.
 *
 * @param {object} object
 * @param {ApplyOptions} [options]
 * @returns {any}
 */
export function apply(object, { owned = true, force = true, adopt = false } = {}) {
  return parseJson(call(() => writes.apply(JSON.stringify(object), { owned, force, adopt })));
}

/**
 * Server-side apply of the `status` subresource of `object` (`apiVersion`, `kind`,
 * `metadata.name` and `status`), with the same rules as {@link apply}. It is not forced unless
 * `force: true`: a status field another manager owns throws a 409 `Conflict` `HostError`.
 * @param {object} object
 * @param {StatusOptions} [options]
 * @returns {any}
 */
export function applyStatus(object, { force = false } = {}) {
  return parseJson(call(() => writes.applyStatus(JSON.stringify(object), { force })));
}

/**
 * Deletes an object with background propagation, if it still has the `uid` and
 * `resourceVersion` of `preconditions` (when given). An object that is already gone throws a 404
 * `HostError` (see `ignoreNotFound`), a failed precondition a 409.
 * @param {Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @param {Preconditions} [preconditions]
 */
export function deleteObject(kind, namespace, name, { uid, resourceVersion } = {}) {
  call(() => writes.delete(kind, namespace ?? undefined, name, { uid, resourceVersion }));
}

/**
 * Applies an RFC 7386 JSON merge patch (`null` removes a key) and returns the patched object.
 * @param {Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @param {object} patch
 * @returns {any}
 */
export function patchMerge(kind, namespace, name, patch) {
  return sendPatch(kind, namespace, name, "merge", patch);
}

/**
 * Applies an RFC 6902 JSON patch (an array of operations) and returns the patched object.
 *
 * A `replace` of `/metadata/resourceVersion` with the resourceVersion the guest read turns the
 * patch into an optimistic-concurrency write: it fails with a 409 if the object changed since.
 * @param {Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @param {object[]} patch
 * @returns {any}
 */
export function patchJson(kind, namespace, name, patch) {
  return sendPatch(kind, namespace, name, "json", patch);
}

/**
 * @param {Gvk} kind
 * @param {string | undefined} namespace
 * @param {string} name
 * @param {"merge" | "json"} type
 * @param {object} patch
 */
function sendPatch(kind, namespace, name, type, patch) {
  const patched = call(() =>
    writes.patch(kind, namespace ?? undefined, name, type, JSON.stringify(patch)),
  );
  return parseJson(patched);
}
