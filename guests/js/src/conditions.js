/**
 * Status conditions in the shape of `metav1.Condition`:
 * `{type, status, observedGeneration?, lastTransitionTime, reason, message}`.
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
 * `lastTransitionTime` is set to now when the condition is new or its status changes, and kept
 * otherwise, so that applying the same status again is a no-op for the API server. A boolean
 * status means `"True"` / `"False"`; an empty `reason` becomes `Unspecified`, since the API
 * requires one.
 *
 * @param {Condition[]} conditions
 * @param {{type: string, status: ConditionStatus | boolean, reason?: string, message?: string,
 *   observedGeneration?: number}} condition
 * @returns {boolean}
 */
export function setCondition(conditions, { type, status, reason, message, observedGeneration }) {
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
        : nowRfc3339(),
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
 * Removes the condition `type` from `conditions` (in place); returns whether it was present.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export function removeCondition(conditions, type) {
  const index = conditions.findIndex((condition) => condition.type === type);
  if (index < 0) {
    return false;
  }
  conditions.splice(index, 1);
  return true;
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
