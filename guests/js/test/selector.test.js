import assert from "node:assert/strict";
import { test } from "node:test";

import { SelectorError, isEmpty, matches, toQuery, validate } from "../src/selector.js";

test("an empty selector matches everything, no selector nothing", () => {
  assert.ok(isEmpty({}));
  assert.ok(isEmpty({ matchLabels: {}, matchExpressions: [] }));
  assert.ok(matches({}, {}));
  assert.equal(toQuery({}), "");
  assert.ok(!isEmpty(undefined) && !isEmpty(null));
  assert.ok(!matches(undefined, {}) && !matches(null, { app: "web" }));
  assert.equal(toQuery(undefined), "");
});

test("matchLabels need exact values", () => {
  const selector = { matchLabels: { app: "web", tier: "fe" } };
  assert.ok(matches(selector, { app: "web", tier: "fe", x: "y" }));
  assert.ok(!matches(selector, { app: "web" }));
  assert.ok(!matches(selector, { app: "db", tier: "fe" }));
  assert.ok(!matches({ matchLabels: { toString: "x" } }, {}), "inherited properties are no labels");
});

test("matchExpressions", () => {
  const selector = {
    matchExpressions: [
      { key: "env", operator: "In", values: ["prod", "staging"] },
      { key: "track", operator: "NotIn", values: ["canary"] },
      { key: "app", operator: "Exists" },
      { key: "legacy", operator: "DoesNotExist", values: [] },
    ],
  };
  assert.ok(matches(selector, { env: "prod", app: "a" }));
  assert.ok(matches(selector, { env: "staging", app: "a", track: "stable" }));
  assert.ok(!matches(selector, { env: "dev", app: "a" }));
  assert.ok(!matches(selector, { env: "prod", app: "a", track: "canary" }));
  assert.ok(!matches(selector, { env: "prod" }));
  assert.ok(!matches(selector, { env: "prod", app: "a", legacy: "" }));
  assert.equal(toQuery(selector), "app,env in (prod,staging),!legacy,track notin (canary)");
});

test("queries sort keys and values, keeping duplicates", () => {
  const selector = {
    matchLabels: { b: "2", a: "1" },
    matchExpressions: [{ key: "c", operator: "In", values: ["y", "x", "y"] }],
  };
  assert.equal(toQuery(selector), "a=1,b=2,c in (x,y,y)");
});

test("rejects invalid selectors", () => {
  for (const requirement of [
    { key: "a", operator: "Equals", values: ["x"] },
    { key: "a", operator: "In", values: [] },
    { key: "a", operator: "NotIn" },
    { key: "a", operator: "Exists", values: ["x"] },
  ]) {
    const selector = { matchExpressions: [requirement] };
    assert.throws(() => matches(selector, { a: "x" }), SelectorError);
    assert.throws(() => toQuery(selector), SelectorError);
    assert.throws(() => validate(selector), /^SelectorError: invalid label selector: key "a"/);
  }
});
