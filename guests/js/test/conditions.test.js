import assert from "node:assert/strict";
import { test } from "node:test";

import { findCondition, nowRfc3339, removeCondition, setCondition } from "../src/conditions.js";

test("formats RFC 3339 with seconds", () => {
  assert.equal(nowRfc3339(new Date(0)), "1970-01-01T00:00:00Z");
  assert.equal(nowRfc3339(new Date(951_782_400_000)), "2000-02-29T00:00:00Z");
  assert.equal(nowRfc3339(new Date(1_714_564_800_999)), "2024-05-01T12:00:00Z");
  assert.match(nowRfc3339(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test("keeps lastTransitionTime while the status holds", () => {
  const conditions = [
    {
      type: "Ready",
      status: "True",
      observedGeneration: 1,
      lastTransitionTime: "2020-01-01T00:00:00Z",
      reason: "Ok",
      message: "",
    },
  ];
  const ready = { type: "Ready", status: "True", reason: "Ok", observedGeneration: 1 };
  assert.equal(setCondition(conditions, ready), false);
  assert.equal(
    setCondition(conditions, { ...ready, status: true, message: "newer", observedGeneration: 2 }),
    true,
  );
  assert.equal(conditions[0].lastTransitionTime, "2020-01-01T00:00:00Z");
  assert.equal(conditions[0].observedGeneration, 2);

  assert.equal(
    setCondition(conditions, { type: "Ready", status: false, observedGeneration: 2 }),
    true,
  );
  assert.notEqual(conditions[0].lastTransitionTime, "2020-01-01T00:00:00Z");
  assert.equal(conditions[0].status, "False");
  assert.equal(conditions[0].reason, "Unspecified");

  assert.equal(
    setCondition(conditions, { type: "Synced", status: "Unknown", reason: "Wait" }),
    true,
  );
  assert.equal(conditions.length, 2);
  assert.equal(findCondition(conditions, "Synced").status, "Unknown");
  assert.equal("observedGeneration" in findCondition(conditions, "Synced"), false);
  assert.equal(removeCondition(conditions, "Synced"), true);
  assert.equal(removeCondition(conditions, "Synced"), false);
  assert.equal(findCondition(conditions, "Synced"), undefined);
});
