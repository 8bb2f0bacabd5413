/**
 * Accessors for `metadata` fields of objects as parsed from JSON.
 *
 * Missing or mistyped fields read as absent (`undefined`); none of these functions throw.
 */
/** `metadata.name`. @param {any} object */
export declare const name: (object: any) => string | undefined;
/** `metadata.namespace`; `undefined` for cluster-scoped objects. @param {any} object */
export declare const namespace: (object: any) => string | undefined;
/** `metadata.uid`. @param {any} object */
export declare const uid: (object: any) => string | undefined;
/** `metadata.resourceVersion`. @param {any} object */
export declare const resourceVersion: (object: any) => string | undefined;
/** `metadata.creationTimestamp` (RFC 3339). @param {any} object */
export declare const creationTimestamp: (object: any) => string | undefined;
/**
 * `metadata.generation`.
 * @param {any} object
 * @returns {number | undefined}
 */
export declare function generation(object: any): number | undefined;
/** Whether `metadata.deletionTimestamp` is set: the object is being deleted. @param {any} object */
export declare const isDeleting: (object: any) => boolean;
/**
 * `metadata.labels`; entries whose value is not a string are skipped.
 * @param {any} object
 * @returns {Record<string, string>}
 */
export declare function labels(object: any): Record<string, string>;
/**
 * The object's key (namespace and name), or `undefined` if it has no name.
 * @param {any} object
 * @returns {import("./kinds.js").ObjectKey | undefined}
 */
export declare function key(object: any): import("./kinds.js").ObjectKey | undefined;
