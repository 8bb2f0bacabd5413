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

/**
 * @typedef {{key: string, operator: string, values?: string[]}} LabelSelectorRequirement
 * @typedef {{matchLabels?: Record<string, string>,
 *   matchExpressions?: LabelSelectorRequirement[]}} LabelSelector
 */

/** A selector that Kubernetes would reject: an unknown operator or a wrong number of values. */
export class SelectorError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(`invalid label selector: ${message}`);
    this.name = "SelectorError";
  }
}

const OPERATORS = new Set(["In", "NotIn", "Exists", "DoesNotExist"]);

/**
 * The checked requirements of `selector`.
 * @param {LabelSelector | undefined} selector
 * @returns {{key: string, operator: string, values: string[]}[]}
 */
function requirements(selector) {
  return (selector?.matchExpressions ?? []).map(({ key, operator, values }) => {
    const quoted = JSON.stringify(key);
    if (!OPERATORS.has(operator)) {
      throw new SelectorError(`key ${quoted}: unknown operator ${JSON.stringify(operator)}`);
    }
    const list = values ?? [];
    const needsValues = operator === "In" || operator === "NotIn";
    if (needsValues && list.length === 0) {
      throw new SelectorError(`key ${quoted}: operator ${operator} needs at least one value`);
    }
    if (!needsValues && list.length > 0) {
      throw new SelectorError(`key ${quoted}: operator ${operator} takes no values`);
    }
    return { key, operator, values: list };
  });
}

/**
 * Whether the selector has no requirement at all (and so matches everything).
 * @param {LabelSelector | undefined} selector
 */
export function isEmpty(selector) {
  return (
    Object.keys(selector?.matchLabels ?? {}).length === 0 &&
    (selector?.matchExpressions ?? []).length === 0
  );
}

/**
 * Throws a {@link SelectorError} if Kubernetes would reject the selector.
 * @param {LabelSelector | undefined} selector
 */
export function validate(selector) {
  requirements(selector);
}

/**
 * Whether `labels` satisfy every requirement of `selector`. Throws a {@link SelectorError} on
 * an invalid selector, whatever the labels.
 * @param {LabelSelector | undefined} selector
 * @param {Record<string, string>} labels
 */
export function matches(selector, labels) {
  const checked = requirements(selector);
  const has = (/** @type {string} */ key) => Object.hasOwn(labels, key);
  return (
    Object.entries(selector?.matchLabels ?? {}).every(
      ([key, value]) => has(key) && labels[key] === value,
    ) &&
    checked.every(({ key, operator, values }) => {
      switch (operator) {
        case "In":
          return has(key) && values.includes(labels[key]);
        case "NotIn":
          return !has(key) || !values.includes(labels[key]);
        case "Exists":
          return has(key);
        default:
          return !has(key);
      }
    })
  );
}

/**
 * The selector in the API server's string syntax (`app=web,tier in (a,b),!legacy`), sorted by
 * key, e.g. for `cache.list`. Empty for an empty selector; throws a {@link SelectorError} on an
 * invalid one.
 * @param {LabelSelector | undefined} selector
 */
export function toQuery(selector) {
  /** @type {[string, string][]} */
  const parts = Object.entries(selector?.matchLabels ?? {}).map(([key, value]) => [
    key,
    `${key}=${value}`,
  ]);
  const set = (/** @type {string[]} */ values) => [...new Set(values)].sort(compare).join(",");
  for (const { key, operator, values } of requirements(selector)) {
    switch (operator) {
      case "In":
        parts.push([key, `${key} in (${set(values)})`]);
        break;
      case "NotIn":
        parts.push([key, `${key} notin (${set(values)})`]);
        break;
      case "Exists":
        parts.push([key, key]);
        break;
      default:
        parts.push([key, `!${key}`]);
    }
  }
  parts.sort(([keyA, partA], [keyB, partB]) => compare(keyA, keyB) || compare(partA, partB));
  return parts.map(([, part]) => part).join(",");
}

/**
 * Code-unit order (not `localeCompare`), as the other SDKs sort.
 * @param {string} a
 * @param {string} b
 */
function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}
