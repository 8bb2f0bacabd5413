/**
 * Kubernetes Events about objects.
 */

import { call } from "./errors.js";
import { events } from "./host.js";

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
export function recordEvent(kind, key, { type, reason, action, note }) {
  call(() =>
    events.recordEvent({
      regardingKind: kind,
      regardingNamespace: key.namespace ?? undefined,
      regardingName: key.name,
      eventType: type === "Warning" ? "warning" : "normal",
      reason,
      action,
      note,
    }),
  );
}
