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
 * The helpers agree with `metav1.LabelSelectorAsSelector` (checked against its vectors in
 * `guests/vectors`). All requirements must hold (logical AND). A selector with neither
 * `matchLabels` nor `matchExpressions` matches every object; no selector (`undefined` or `null`)
 * matches none.
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
/**
 * A selector that Kubernetes would reject: an unknown operator, a wrong number of values, or an
 * invalid label key or value.
 */
export declare class SelectorError extends Error {
    /** @param {string} message */
    constructor(message: string);
}
/**
 * Whether the selector is present and has no requirement at all (and so matches everything).
 * @param {LabelSelector | null | undefined} selector
 */
export declare function isEmpty(selector: LabelSelector | null | undefined): boolean;
/**
 * Throws a {@link SelectorError} if Kubernetes would reject the selector.
 * @param {LabelSelector | null | undefined} selector
 */
export declare function validate(selector: LabelSelector | null | undefined): void;
/**
 * Whether `labels` satisfy every requirement of `selector`; never for no selector. Throws a
 * {@link SelectorError} on an invalid selector, whatever the labels.
 * @param {LabelSelector | null | undefined} selector
 * @param {Record<string, string>} labels
 */
export declare function matches(selector: LabelSelector | null | undefined, labels: Record<string, string>): boolean;
/**
 * The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), as
 * apimachinery prints it, e.g. for `cache.list`: requirements sorted by key (those on one key in
 * the order given, matchLabels first), values sorted. Empty for an empty selector, and also for
 * no selector, which matches nothing: tell them apart before listing. Throws a
 * {@link SelectorError} on an invalid selector.
 * @param {LabelSelector | null | undefined} selector
 */
export declare function toQuery(selector: LabelSelector | null | undefined): string;
