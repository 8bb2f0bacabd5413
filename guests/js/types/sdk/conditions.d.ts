/**
 * Status conditions in the shape of `metav1.Condition`:
 * `{type, status, observedGeneration?, lastTransitionTime, reason, message}`. The helpers agree
 * with those of `k8s.io/apimachinery/pkg/api/meta` (checked against its vectors in
 * `guests/vectors`), except that `setCondition` gives an empty `reason` one.
 */
export type ConditionStatus = "True" | "False" | "Unknown";
export type Condition = {
    /**
     * CamelCase, e.g. `Ready`
     */
    type: string;
    status: ConditionStatus;
    /**
     * the `metadata.generation` it was computed from
     */
    observedGeneration?: number;
    /**
     * when `status` last changed (RFC 3339, seconds)
     */
    lastTransitionTime: string;
    /**
     * machine-readable CamelCase reason for the last transition
     */
    reason: string;
    /**
     * human-readable details (may be empty)
     */
    message: string;
};
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
export declare function findCondition(conditions: Condition[], type: string): Condition | undefined;
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
export declare function setCondition(conditions: Condition[], { type, status, reason, message, observedGeneration, lastTransitionTime }: {
    type: string;
    status: ConditionStatus | boolean;
    reason?: string;
    message?: string;
    observedGeneration?: number;
    lastTransitionTime?: string;
}): boolean;
/**
 * Removes every condition of type `type` from `conditions` (in place); returns whether there was
 * one.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export declare function removeCondition(conditions: Condition[], type: string): boolean;
/**
 * Whether the condition `type` is present with status `"True"`.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export declare function isConditionTrue(conditions: Condition[], type: string): boolean;
/**
 * Whether the condition `type` is present with status `"False"`.
 * @param {Condition[]} conditions
 * @param {string} type
 */
export declare function isConditionFalse(conditions: Condition[], type: string): boolean;
/**
 * Whether the condition `type` is present with this status.
 * @param {Condition[]} conditions
 * @param {string} type
 * @param {ConditionStatus} status
 */
export declare function isConditionPresentAndEqual(conditions: Condition[], type: string, status: ConditionStatus): boolean;
/**
 * `time` as RFC 3339 in UTC with second precision, as Kubernetes prints `metav1.Time`
 * (`2024-05-01T12:00:00Z`); the current time by default (the WASI wall clock in a guest).
 * @param {Date} [time]
 */
export declare function nowRfc3339(time?: Date): string;
