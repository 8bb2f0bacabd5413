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

/**
 * @typedef {{key: string, operator: string, values?: string[]}} LabelSelectorRequirement
 * @typedef {{matchLabels?: Record<string, string>,
 *   matchExpressions?: LabelSelectorRequirement[]}} LabelSelector
 */

/**
 * A selector that Kubernetes would reject: an unknown operator, a wrong number of values, or an
 * invalid label key or value.
 */
export class SelectorError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(`invalid label selector: ${message}`);
    this.name = "SelectorError";
  }
}

const OPERATORS = new Set(["In", "NotIn", "Exists", "DoesNotExist"]);

/** A label name, or the name part of a key: at most 63 of these characters. */
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
/** The prefix of a label key: a DNS subdomain of at most 253 characters. */
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** @param {unknown} key */
function isLabelKey(key) {
  if (typeof key !== "string") {
    return false;
  }
  const [prefix, name, ...rest] = key.includes("/") ? key.split("/") : ["", key];
  const validPrefix = !key.includes("/") || (prefix.length <= 253 && SUBDOMAIN.test(prefix));
  return rest.length === 0 && validPrefix && name.length <= 63 && NAME.test(name);
}

/** @param {unknown} value */
function isLabelValue(value) {
  return value === "" || (typeof value === "string" && value.length <= 63 && NAME.test(value));
}

/**
 * The checked requirements of `selector`, matchLabels (as `Equals`) first, as apimachinery
 * lists them.
 * @param {LabelSelector | null | undefined} selector
 * @returns {{key: string, operator: string, values: string[]}[]}
 */
function requirements(selector) {
  const labels = Object.entries(selector?.matchLabels ?? {}).map(([key, value]) =>
    checked(key, "Equals", [value]),
  );
  const expressions = (selector?.matchExpressions ?? []).map(({ key, operator, values }) => {
    if (!OPERATORS.has(operator)) {
      throw new SelectorError(
        `key ${JSON.stringify(key)}: unknown operator ${JSON.stringify(operator)}`,
      );
    }
    return checked(key, operator, values ?? []);
  });
  return [...labels, ...expressions];
}

/**
 * The requirement, if Kubernetes would accept it.
 * @param {string} key
 * @param {string} operator
 * @param {string[]} values
 */
function checked(key, operator, values) {
  const quoted = JSON.stringify(key);
  if (!isLabelKey(key)) {
    throw new SelectorError(`invalid key ${quoted}`);
  }
  const needsValues = operator !== "Exists" && operator !== "DoesNotExist";
  if (needsValues && values.length === 0) {
    throw new SelectorError(`key ${quoted}: operator ${operator} needs at least one value`);
  }
  if (!needsValues && values.length > 0) {
    throw new SelectorError(`key ${quoted}: operator ${operator} takes no values`);
  }
  const invalid = values.find((value) => !isLabelValue(value));
  if (invalid !== undefined) {
    throw new SelectorError(`key ${quoted}: invalid value ${JSON.stringify(invalid)}`);
  }
  return { key, operator, values };
}

/**
 * Whether the selector is present and has no requirement at all (and so matches everything).
 * @param {LabelSelector | null | undefined} selector
 */
export function isEmpty(selector) {
  return (
    selector != null &&
    Object.keys(selector.matchLabels ?? {}).length === 0 &&
    (selector.matchExpressions ?? []).length === 0
  );
}

/**
 * Throws a {@link SelectorError} if Kubernetes would reject the selector.
 * @param {LabelSelector | null | undefined} selector
 */
export function validate(selector) {
  requirements(selector);
}

/**
 * Whether `labels` satisfy every requirement of `selector`; never for no selector. Throws a
 * {@link SelectorError} on an invalid selector, whatever the labels.
 * @param {LabelSelector | null | undefined} selector
 * @param {Record<string, string>} labels
 */
export function matches(selector, labels) {
  const checked = requirements(selector);
  const has = (/** @type {string} */ key) => Object.hasOwn(labels, key);
  return (
    selector != null &&
    checked.every(({ key, operator, values }) => {
      switch (operator) {
        case "NotIn":
          return !has(key) || !values.includes(labels[key]);
        case "Exists":
          return has(key);
        case "DoesNotExist":
          return !has(key);
        default:
          return has(key) && values.includes(labels[key]);
      }
    })
  );
}

/**
 * The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), as
 * apimachinery prints it, e.g. for `cache.list`: requirements sorted by key (those on one key in
 * the order given, matchLabels first), values sorted. Empty for an empty selector, and also for
 * no selector, which matches nothing: tell them apart before listing. Throws a
 * {@link SelectorError} on an invalid selector.
 * @param {LabelSelector | null | undefined} selector
 */
export function toQuery(selector) {
  return requirements(selector)
    .sort((a, b) => compare(a.key, b.key))
    .map(({ key, operator, values }) => {
      const set = [...values].sort(compare).join(",");
      switch (operator) {
        case "Equals":
          return `${key}=${values[0]}`;
        case "In":
          return `${key} in (${set})`;
        case "NotIn":
          return `${key} notin (${set})`;
        case "Exists":
          return key;
        default:
          return `!${key}`;
      }
    })
    .join(",");
}

/**
 * Code-unit order (not `localeCompare`), as the other SDKs sort.
 * @param {string} a
 * @param {string} b
 */
function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}
