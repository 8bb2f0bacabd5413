/**
 * The JavaScript SDK for kubewasm controller guests.
 *
 * A guest is a WebAssembly component exporting the `guest` interface of the
 * `kubewasm:controller` world (`wit/controller.wit`). With this package an author defines a
 * controller and exports it as `guest`:
 *
 * ```js
 * import { Metadata, defineController, gvk, log } from "@kubewasm/guest";
 *
 * export const guest = defineController({
 *   metadata: new Metadata("hello", gvk("", "v1", "ConfigMap")),
 *   reconcile(request) {
 *     log.info("reconciling", { name: request.name });
 *   },
 * });
 * ```
 *
 * Objects are plain JavaScript values parsed from the API server's JSON; host failures are
 * thrown as `HostError`s. The pure helpers (`meta`, `owner`, `conditions`, `selector`,
 * `generateName`, kinds and `Metadata`) are also importable one by one from
 * `@kubewasm/guest/<module>`, which loads in Node.js for unit tests; this module reaches the
 * host, so it only loads inside a component.
 */
export * as cache from "./cache.js";
export * as conditions from "./conditions.js";
export { defineController, requeueAfter } from "./controller.js";
export { HostError, PermanentError, ReconcileError, TransientError, ignoreNotFound, } from "./errors.js";
export { recordEvent } from "./events.js";
export { CHANGES, Mapping, Metadata, apiVersionOf, formatGvk, formatKey, gvk, gvkFromApiVersion, selection, } from "./kinds.js";
export * as log from "./log.js";
export * as meta from "./meta.js";
export { generateName } from "./names.js";
export * as owner from "./owner.js";
export * as selector from "./selector.js";
export { apply, applyStatus, deleteObject, patchJson, patchMerge } from "./writes.js";
