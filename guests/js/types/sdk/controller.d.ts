/// <reference path="../wit/controller.d.ts" />
/**
 * The controller an author writes, and the adapter that exports it as the component's `guest`
 * interface.
 */
import { Metadata } from "./kinds.js";
export type Gvk = import("./kinds.js").Gvk;
export type ObjectKey = import("./kinds.js").ObjectKey;
export type Reason = import("kubewasm:controller/types@0.2.1").Reason;
export type Request = {
    /**
     * namespace and name of the primary object
     */
    key: ObjectKey;
    /**
     * `key.namespace`; `undefined` for a cluster-scoped kind
     */
    namespace: string | undefined;
    /**
     * `key.name`
     */
    name: string;
    /**
     * why the key was queued (the first reason wins)
     */
    reason: Reason;
    /**
     * 1 on the first try, counting up while reconciles keep failing
     */
    attempt: number;
    /**
     * the primary object as the cache holds it now (without
     * `metadata.managedFields`), or `undefined` when it no longer exists
     */
    object: any;
};
export type Action = undefined | {
    requeueAfter: number;
};
export type Controller = {
    /**
     * the declaration (a {@link Metadata} or the
     * WIT `controller-metadata` record, whose `reconcileOn` defaults to `{any: true}`), read once
     * when the module is loaded; must not depend on anything but the module
     */
    metadata: Metadata | (() => Metadata);
    /**
     * brings the world in line with the
     * primary object; throws to fail (see `ReconcileError.from`)
     */
    reconcile: (request: Request) => Action | void;
    /**
     * cleans up before a primary object
     * carrying the finalizer is deleted; the host removes the finalizer once it returns done.
     * Default: done.
     */
    finalize?: (request: Request) => Action | void;
    /**
     * maps a changed object of a kind
     * watched with `Mapping.guest` to the primary keys to reconcile. Default: none.
     */
    mapKeys?: (kind: Gvk, object: any) => ObjectKey[];
};
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
export declare function requeueAfter(milliseconds: number): Action;
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
export declare function defineController(controller: Controller): {
    /** @returns {import("kubewasm:controller/types@0.2.1").ControllerMetadata} */
    metadata(): import("kubewasm:controller/types@0.2.1").ControllerMetadata;
    /** @param {any} raw */
    reconcile(raw: any): {
        tag: string;
        val?: undefined;
    } | {
        tag: string;
        val: bigint;
    };
    /** @param {any} raw */
    finalize(raw: any): {
        tag: string;
        val?: undefined;
    } | {
        tag: string;
        val: bigint;
    };
    /**
     * @param {Gvk} kind
     * @param {string} text
     */
    mapKeys(kind: Gvk, text: string): {
        namespace: string | undefined;
        name: string;
    }[];
};
