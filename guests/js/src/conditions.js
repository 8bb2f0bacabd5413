/**
 * Status conditions in the shape of `metav1.Condition`:
 * `{type, status, observedGeneration?, lastTransitionTime, reason, message}`. The helpers agree
 * with those of `k8s.io/apimachinery/pkg/api/meta` (checked against its vectors in
 * `guests/vectors`), except that `setCondition` gives an empty `reason` one.
 */

/**
 * @typedef {"True" | "False" | "Unknown"} ConditionStatus
 * @typedef {object} Condition
 * @property {string} type CamelCase, e.g. `Ready`
 * @property {ConditionStatus} status
 * @property {number} [observedGeneration] the `metadata.generation` it was computed from
 * @property {string} lastTransitionTime when `status` last changed (RFC 3339, seconds)
 * @property {string} reason machine-readable CamelCase reason for the last transition
 * @property {string} message human-readable details (may be empty)
 */

/**
 * The condition of type `type` in `conditions`, if present.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export function findCondition(conditions, type) {
  return conditions.find((condition) => condition.type === type);
}

/**
 * Adds or updates the condition `type` in `conditions` (in place); returns whether anything
 * changed.
 *
 * As in `meta.SetStatusCondition`, `lastTransitionTime` is kept while the status holds, so that
 * applying the same status again is a no-op for the API server; when the condition is new or its
 * status changes, it becomes the `lastTransitionTime` given, or now when none is. A boolean
 * status means `"True"` / `"False"`; an empty `reason` becomes `Unspecified`, since the API
 * requires one.
 *
 * @param {Condition[]} conditions
 * @param {{type: string, status: ConditionStatus | boolean, reason?: string, message?: string,
 *   observedGeneration?: number, lastTransitionTime?: string}} condition
 * @returns {boolean}
 */
export function setCondition(
  conditions,
  { type, status, reason, message, observedGeneration, lastTransitionTime },
) {
  const wanted = typeof status === "boolean" ? (status ? "True" : "False") : status;
  const existing = conditions.findIndex((condition) => condition.type === type);
  const previous = conditions[existing];
  /** @type {Condition} */
  const updated = {
    type,
    status: wanted,
    ...(observedGeneration === undefined ? {} : { observedGeneration }),
    lastTransitionTime:
      previous && previous.status === wanted && previous.lastTransitionTime
        ? previous.lastTransitionTime
        : lastTransitionTime || nowRfc3339(),
    reason: reason || "Unspecified",
    message: message ?? "",
  };
  if (existing < 0) {
    conditions.push(updated);
    return true;
  }
  conditions[existing] = updated;
  return !sameCondition(previous, updated);
}

/**
 * Removes every condition of type `type` from `conditions` (in place); returns whether there was
 * one.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export function removeCondition(conditions, type) {
  const kept = conditions.filter((condition) => condition.type !== type);
  const removed = kept.length !== conditions.length;
  conditions.splice(0, conditions.length, ...kept);
  return removed;
}

/**
 * Whether the condition `type` is present with status `"True"`.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export function isConditionTrue(conditions, type) {
  return isConditionPresentAndEqual(conditions, type, "True");
}

/**
 * Whether the condition `type` is present with status `"False"`.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export function isConditionFalse(conditions, type) {
  return isConditionPresentAndEqual(conditions, type, "False");
}

/**
 * Whether the condition `type` is present with this status.
 * @param {Condition[]} conditions
 * @param {string} type
 * @param {ConditionStatus} status
 */
export function isConditionPresentAndEqual(conditions, type, status) {
  return findCondition(conditions, type)?.status === status;
}

/**
 * `time` as RFC 3339 in UTC with second precision, as Kubernetes prints `metav1.Time`
 * (`2024-05-01T12:00:00Z`); the current time by default (the WASI wall clock in a guest).
 * @param {Date} [time]
 */
export function nowRfc3339(time = new Date()) {
  return `${time.toISOString().slice(0, 19)}Z`;
}

/**
 * @param {Condition} a
 * @param {Condition} b
 */
function sameCondition(a, b) {
  return (
    a.type === b.type &&
    a.status === b.status &&
    a.observedGeneration === b.observedGeneration &&
    a.lastTransitionTime === b.lastTransitionTime &&
    a.reason === b.reason &&
    a.message === b.message
  );
}
