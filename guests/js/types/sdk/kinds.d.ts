/// <reference path="../wit/controller.d.ts" />
/**
 * Kinds, object keys and the controller's declaration, in the shapes of the WIT records
 * (`{group, version, kind}`, `{namespace, name}`, ...).
 */
export type Gvk = {
    group: string;
    version: string;
    kind: string;
};
export type ObjectKey = {
    namespace?: string;
    name: string;
};
export type Selection = {
    kind: Gvk;
    namespace?: string;
    labelSelector?: string;
};
export type Mapping = {
    tag: "owner";
} | {
    tag: "label";
    val: string;
} | {
    tag: "guest";
};
export type Change = "generation" | "labels" | "annotations" | "any";
/**
 * @typedef {{group: string, version: string, kind: string}} Gvk
 * @typedef {{namespace?: string, name: string}} ObjectKey
 * @typedef {{kind: Gvk, namespace?: string, labelSelector?: string}} Selection
 * @typedef {{tag: "owner"} | {tag: "label", val: string} | {tag: "guest"}} Mapping
 * @typedef {"generation" | "labels" | "annotations" | "any"} Change a part of a primary object
 *   whose update enqueues its key: `metadata.generation` (the spec, for kinds with a status
 *   subresource), `metadata.labels`, `metadata.annotations`, or anything at all
 */
/**
 * The changes {@link Metadata#reconcileOn} accepts, in the order of the WIT flags `changes`.
 * @type {readonly Change[]}
 */
export declare const CHANGES: readonly Change[];
/**
 * A kind from its group (`""` for the core group), version and kind.
 * @param {string} group
 * @param {string} version
 * @param {string} kind
 * @returns {Gvk}
 */
export declare function gvk(group: string, version: string, kind: string): Gvk;
/**
 * A kind from an `apiVersion` (`apps/v1`, or `v1` for the core group) and a kind.
 * @param {string} apiVersion
 * @param {string} kind
 * @returns {Gvk}
 */
export declare function gvkFromApiVersion(apiVersion: string, kind: string): Gvk;
/**
 * The `apiVersion` of objects of `kind`: `group/version`, or `version` for the core group.
 * @param {Gvk} kind
 */
export declare function apiVersionOf(kind: Gvk): string;
/**
 * `apps/v1, Kind=Deployment`, as the API machinery prints kinds.
 * @param {Gvk} kind
 */
export declare function formatGvk(kind: Gvk): string;
/**
 * `namespace/name`, or `name` for a cluster-scoped object.
 * @param {ObjectKey} key
 */
export declare function formatKey(key: ObjectKey): string;
/**
 * Objects of `kind`, optionally only in `namespace` and matching `labelSelector` (the API
 * server's syntax: `app=web,tier in (a,b)`).
 * @param {Gvk} kind
 * @param {{namespace?: string, labelSelector?: string}} [options]
 * @returns {Selection}
 */
export declare function selection(kind: Gvk, { namespace, labelSelector }?: {
    namespace?: string;
    labelSelector?: string;
}): Selection;
/** How a change to a watched object turns into keys of the primary kind. */
export declare const Mapping: Readonly<{
    /** Enqueue every owner in the object's `ownerReferences` whose kind is the primary kind. */
    owner: Readonly<{
        tag: "owner";
    }>;
    /** Call the controller's `mapKeys` with the changed object. */
    guest: Readonly<{
        tag: "guest";
    }>;
    /**
     * Enqueue the primary object, in the same namespace, named by this label's value.
     * @param {string} label
     * @returns {Mapping}
     */
    label: (label: string) => Mapping;
}>;
/**
 * What a controller declares about itself, built step by step:
 *
 * ```js
 * new Metadata("podset", podsetKind).owns(podKind).watch(podKind, Mapping.guest).maxConcurrency(4)
 * ```
 *
 * Defaults: no owned or watched kinds, no finalizer, a concurrency of 1, no resync, and every
 * update of a primary object reconciles it.
 */
export declare class Metadata {
    name: string;
    primary: Selection;
    /** @type {Gvk[]} */
    ownedKinds: Gvk[];
    /** @type {{selection: Selection, mapping: Mapping}[]} */
    watches: {
        selection: Selection;
        mapping: Mapping;
    }[];
    /** @type {string | undefined} */
    finalizerName: string | undefined;
    concurrency: number;
    /** @type {number | undefined} */
    resyncSeconds: number | undefined;
    /** @type {Change[]} */
    changes: Change[];
    /**
     * @param {string} name the controller's name (lowercase letters, digits and `-`): the
     *   `controller` label of its metrics and the suffix of its field manager `kubewasm-<name>`
     * @param {Gvk | Selection} primary the kind (or selection of objects) it reconciles
     */
    constructor(name: string, primary: Gvk | Selection);
    /**
     * Adds a kind this controller creates and owns; a change to one enqueues its controller owner.
     * @param {Gvk} kind
     */
    owns(kind: Gvk): this;
    /**
     * Adds a watched kind (or selection) whose changes enqueue keys through `mapping`.
     * @param {Gvk | Selection} kindOrSelection
     * @param {Mapping} mapping
     */
    watch(kindOrSelection: Gvk | Selection, mapping: Mapping): this;
    /**
     * Sets the finalizer the host adds to every primary object and removes once `finalize`
     * returns done.
     * @param {string} finalizer
     */
    finalizer(finalizer: string): this;
    /**
     * Sets how many keys may be reconciled at the same time (values below 1 become 1).
     * @param {number} max
     */
    maxConcurrency(max: number): this;
    /**
     * Enqueues every primary object again after `seconds` without a change (whole seconds,
     * rounded down, at least 1).
     * @param {number} seconds
     */
    resyncEvery(seconds: number): this;
    /**
     * Reconciles a primary object only on updates that change one of `changes`, e.g.
     * `reconcileOn("generation", "labels")` to ignore updates of the status alone. Creation,
     * deletion, the start of deletion, a missing finalizer, resync, reload and changes of owned or
     * watched objects always enqueue it. Throws a `TypeError` for an unknown change or none.
     * @param {...Change} changes
     */
    reconcileOn(...changes: Change[]): this;
    /**
     * The WIT `controller-metadata` record.
     * @returns {import("kubewasm:controller/types@0.2.1").ControllerMetadata}
     */
    toWit(): import("kubewasm:controller/types@0.2.1").ControllerMetadata;
}
