/**
 * Kubernetes Events about objects.
 */
/**
 * Records an event about the object `key` of `kind` (its uid is filled in from the cache).
 *
 * `type` is `"Normal"` or `"Warning"`, `reason` short CamelCase (`SuccessfulCreate`), `action`
 * what the controller did (`Create`), `note` human-readable text. Events are best effort:
 * repeated ones may be merged or dropped, so callers usually ignore a thrown `HostError`.
 *
 * @param {import("./kinds.js").Gvk} kind
 * @param {import("./kinds.js").ObjectKey} key
 * @param {{type: "Normal" | "Warning", reason: string, action: string, note: string}} event
 */
export declare function recordEvent(kind: import("./kinds.js").Gvk, key: import("./kinds.js").ObjectKey, { type, reason, action, note }: {
    type: "Normal" | "Warning";
    reason: string;
    action: string;
    note: string;
}): void;
