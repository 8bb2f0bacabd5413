/**
 * Label selectors (`matchLabels` / `matchExpressions`), as in `metav1.LabelSelector`:
 *
 * ```js
 * const web = { matchLabels: { app: "web" },
 *   matchExpressions: [{ key: "tier", operator: "In", values: ["a", "b"] }] };
 * selector.matches(web, { app: "web", tier: "a" }); // true
 * selector.toQuery(web); // "app=web,tier in (a,b)"
 * ```
 *
 * All requirements must hold (logical AND); a selector with neither `matchLabels` nor
 * `matchExpressions` (or `undefined`) matches every object, as in Kubernetes.
 */
export type LabelSelectorRequirement = {
    key: string;
    operator: string;
    values?: string[];
};
export type LabelSelector = {
    matchLabels?: Record<string, string>;
    matchExpressions?: LabelSelectorRequirement[];
};
/**
 * @typedef {{key: string, operator: string, values?: string[]}} LabelSelectorRequirement
 * @typedef {{matchLabels?: Record<string, string>,
 *   matchExpressions?: LabelSelectorRequirement[]}} LabelSelector
 */
/** A selector that Kubernetes would reject: an unknown operator or a wrong number of values. */
export declare class SelectorError extends Error {
    /** @param {string} message */
    constructor(message: string);
}
/**
 * Whether the selector has no requirement at all (and so matches everything).
 * @param {LabelSelector | undefined} selector
 */
export declare function isEmpty(selector: LabelSelector | undefined): boolean;
/**
 * Throws a {@link SelectorError} if Kubernetes would reject the selector.
 * @param {LabelSelector | undefined} selector
 */
export declare function validate(selector: LabelSelector | undefined): void;
/**
 * Whether `labels` satisfy every requirement of `selector`. Throws a {@link SelectorError} on
 * an invalid selector, whatever the labels.
 * @param {LabelSelector | undefined} selector
 * @param {Record<string, string>} labels
 */
export declare function matches(selector: LabelSelector | undefined, labels: Record<string, string>): boolean;
/**
 * The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), sorted by
 * key, e.g. for `cache.list`. Empty for an empty selector; throws a {@link SelectorError} on an
 * invalid one.
 * @param {LabelSelector | undefined} selector
 */
export declare function toQuery(selector: LabelSelector | undefined): string;
