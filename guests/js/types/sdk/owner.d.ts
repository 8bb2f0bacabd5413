/**
 * Owner references (`metadata.ownerReferences`).
 */
export type OwnerReference = {
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    /**
     * whether this owner is the managing controller
     */
    controller?: boolean;
    /**
     * whether the owner's foreground deletion waits
     */
    blockOwnerDeletion?: boolean;
};
/**
 * `metadata.ownerReferences` of `object`, as new objects with only the fields above; malformed
 * entries are skipped.
 * @param {any} object
 * @returns {OwnerReference[]}
 */
export declare function ownerReferences(object: any): OwnerReference[];
/**
 * The controller owner reference of `object` (the one with `controller: true`), if any.
 * @param {any} object
 * @returns {OwnerReference | undefined}
 */
export declare function controllerRef(object: any): OwnerReference | undefined;
/**
 * The key of `object`'s controller owner: its name, in `object`'s namespace. Handy in `mapKeys`.
 * @param {any} object
 * @returns {import("./kinds.js").ObjectKey | undefined}
 */
export declare function controllerOwnerOf(object: any): import("./kinds.js").ObjectKey | undefined;
/**
 * Whether `child`'s controller owner reference points at the object with uid `ownerUid`.
 * @param {any} child
 * @param {string} ownerUid
 */
export declare function isControlledBy(child: any, ownerUid: string): boolean;
/**
 * A controller owner reference to `owner` (`controller` and `blockOwnerDeletion` true), as the
 * host adds it for `owned` applies; `undefined` if `owner` lacks apiVersion, kind, name or uid.
 * @param {any} owner
 * @returns {OwnerReference | undefined}
 */
export declare function controllerReferenceTo(owner: any): OwnerReference | undefined;
