/**
 * Owner references (`metadata.ownerReferences`).
 */

import * as meta from "./meta.js";

/**
 * @typedef {object} OwnerReference
 * @property {string} apiVersion
 * @property {string} kind
 * @property {string} name
 * @property {string} uid
 * @property {boolean} [controller] whether this owner is the managing controller
 * @property {boolean} [blockOwnerDeletion] whether the owner's foreground deletion waits
 */

const REQUIRED = ["apiVersion", "kind", "name", "uid"];

/**
 * `metadata.ownerReferences` of `object`, as new objects with only the fields above; malformed
 * entries are skipped.
 * @param {any} object
 * @returns {OwnerReference[]}
 */
export function ownerReferences(object) {
  const refs = object?.metadata?.ownerReferences;
  return Array.isArray(refs) ? refs.map(ownerReference).filter((ref) => ref !== undefined) : [];
}

/**
 * @param {any} ref
 * @returns {OwnerReference | undefined}
 */
function ownerReference(ref) {
  if (
    !ref ||
    typeof ref !== "object" ||
    !REQUIRED.every((field) => typeof ref[field] === "string")
  ) {
    return undefined;
  }
  /** @type {OwnerReference} */
  const copy = { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, uid: ref.uid };
  if (typeof ref.controller === "boolean") {
    copy.controller = ref.controller;
  }
  if (typeof ref.blockOwnerDeletion === "boolean") {
    copy.blockOwnerDeletion = ref.blockOwnerDeletion;
  }
  return copy;
}

/**
 * The controller owner reference of `object` (the one with `controller: true`), if any.
 * @param {any} object
 * @returns {OwnerReference | undefined}
 */
export function controllerRef(object) {
  return ownerReferences(object).find((ref) => ref.controller === true);
}

/**
 * The key of `object`'s controller owner: its name, in `object`'s namespace. Handy in `mapKeys`.
 * @param {any} object
 * @returns {import("./kinds.js").ObjectKey | undefined}
 */
export function controllerOwnerOf(object) {
  const owner = controllerRef(object);
  return owner && { namespace: meta.namespace(object), name: owner.name };
}

/**
 * Whether `child`'s controller owner reference points at the object with uid `ownerUid`.
 * @param {any} child
 * @param {string} ownerUid
 */
export function isControlledBy(child, ownerUid) {
  return controllerRef(child)?.uid === ownerUid;
}

/**
 * A controller owner reference to `owner` (`controller` and `blockOwnerDeletion` true), as the
 * host adds it for `owned` applies; `undefined` if `owner` lacks apiVersion, kind, name or uid.
 * @param {any} owner
 * @returns {OwnerReference | undefined}
 */
export function controllerReferenceTo(owner) {
  const reference = ownerReference({
    apiVersion: owner?.apiVersion,
    kind: owner?.kind,
    name: meta.name(owner),
    uid: meta.uid(owner),
  });
  return reference && { ...reference, controller: true, blockOwnerDeletion: true };
}
