/**
 * Accessors for `metadata` fields of objects as parsed from JSON.
 *
 * Missing or mistyped fields read as absent (`undefined`); none of these functions throw.
 */

/**
 * @param {any} object
 * @param {string} field
 * @returns {string | undefined}
 */
function stringField(object, field) {
  const value = object?.metadata?.[field];
  return typeof value === "string" ? value : undefined;
}

/** `metadata.name`. @param {any} object */
export const name = (object) => stringField(object, "name");

/** `metadata.namespace`; `undefined` for cluster-scoped objects. @param {any} object */
export const namespace = (object) => stringField(object, "namespace");

/** `metadata.uid`. @param {any} object */
export const uid = (object) => stringField(object, "uid");

/** `metadata.resourceVersion`. @param {any} object */
export const resourceVersion = (object) => stringField(object, "resourceVersion");

/** `metadata.creationTimestamp` (RFC 3339). @param {any} object */
export const creationTimestamp = (object) => stringField(object, "creationTimestamp");

/**
 * `metadata.generation`.
 * @param {any} object
 * @returns {number | undefined}
 */
export function generation(object) {
  const value = object?.metadata?.generation;
  return Number.isInteger(value) ? value : undefined;
}

/** Whether `metadata.deletionTimestamp` is set: the object is being deleted. @param {any} object */
export const isDeleting = (object) => stringField(object, "deletionTimestamp") !== undefined;

/**
 * `metadata.labels`; entries whose value is not a string are skipped.
 * @param {any} object
 * @returns {Record<string, string>}
 */
export function labels(object) {
  const labels = object?.metadata?.labels;
  if (!labels || typeof labels !== "object" || Array.isArray(labels)) {
    return {};
  }
  return Object.fromEntries(
    Object.entries(labels).filter(([, value]) => typeof value === "string"),
  );
}

/**
 * The object's key (namespace and name), or `undefined` if it has no name.
 * @param {any} object
 * @returns {import("./kinds.js").ObjectKey | undefined}
 */
export function key(object) {
  const objectName = name(object);
  return objectName === undefined ? undefined : { namespace: namespace(object), name: objectName };
}
