// The SDK against the vectors that k8s.io/apimachinery computed (guests/vectors).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { isDeepStrictEqual } from "node:util";

import {
  findCondition,
  isConditionFalse,
  isConditionPresentAndEqual,
  isConditionTrue,
  removeCondition,
  setCondition,
} from "../src/conditions.js";
import { SelectorError, isEmpty, matches, toQuery, validate } from "../src/selector.js";

/** @param {string} name */
function vectors(name) {
  const url = new URL(`../../vectors/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8")).vectors;
}

/**
 * Fails listing the first disagreements, if any.
 * @param {object[]} disagreements
 */
function agree(disagreements) {
  const shown = disagreements.slice(0, 5).map((disagreement) => JSON.stringify(disagreement));
  assert.equal(disagreements.length, 0, `${disagreements.length} disagreements:\n${shown.join("\n")}`);
}

/** @param {() => unknown} call */
function rejects(call) {
  try {
    call();
    return false;
  } catch (error) {
    if (error instanceof SelectorError) {
      return true;
    }
    throw error;
  }
}

/**
 * The SDK's answers in the shape of a vector's.
 * @param {any} selector
 * @param {{labels: Record<string, string>}[]} cases
 */
function selectorAnswers(selector, cases) {
  const rejected = [
    () => validate(selector),
    () => toQuery(selector),
    () => matches(selector, {}),
  ].map(rejects);
  if (rejected.some(Boolean)) {
    return { error: rejected.every(Boolean) || rejected };
  }
  return {
    error: false,
    empty: isEmpty(selector),
    query: toQuery(selector),
    matches: cases.map(({ labels }) => ({ labels, match: matches(selector, labels) })),
  };
}

test("label selectors agree with apimachinery", () => {
  const disagreements = [];
  for (const { name, selector, ...want } of vectors("selectors")) {
    const got = selectorAnswers(selector, want.matches ?? []);
    if (!isDeepStrictEqual(got, want)) {
      disagreements.push({ name, selector, got, want });
    }
  }
  agree(disagreements);
});

/**
 * Performs one step on `conditions` and returns the answers in the shape of the vector's.
 * @param {import("../src/conditions.js").Condition[]} conditions
 * @param {any} step
 */
function perform(conditions, { op, type, condition, status }) {
  switch (op) {
    case "set":
      return { changed: setCondition(conditions, { ...condition }), conditions: clone(conditions) };
    case "remove":
      return { removed: removeCondition(conditions, type), conditions: clone(conditions) };
    case "find":
      return { found: findCondition(conditions, type) ?? null };
    case "isTrue":
      return { result: isConditionTrue(conditions, type) };
    case "isFalse":
      return { result: isConditionFalse(conditions, type) };
    case "isPresentAndEqual":
      return { result: isConditionPresentAndEqual(conditions, type, status) };
    default:
      throw new Error(`unknown step ${op}`);
  }
}

/** @param {object[]} conditions */
function clone(conditions) {
  return conditions.map((condition) => ({ ...condition }));
}

test("status conditions agree with apimachinery", () => {
  const disagreements = [];
  for (const { name, conditions: initial, steps } of vectors("conditions")) {
    const conditions = clone(initial);
    for (const [index, step] of steps.entries()) {
      const { op, type, condition, status, ...want } = step;
      const got = perform(conditions, step);
      if (!isDeepStrictEqual(got, want)) {
        disagreements.push({ name, step: index, op, type, condition, got, want });
        break;
      }
    }
  }
  agree(disagreements);
});
