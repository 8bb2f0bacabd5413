import assert from "node:assert/strict";
import { test } from "node:test";

import { summary } from "../src/summary.js";

test("summarises a ConfigMap", () => {
  const configMap = { metadata: { name: "hello", resourceVersion: "7" }, data: { a: "1", b: "2" } };
  assert.deepEqual(summary(configMap), { resourceVersion: "7", dataKeys: "2" });
  assert.deepEqual(summary({ metadata: {} }), { resourceVersion: "", dataKeys: "0" });
});
