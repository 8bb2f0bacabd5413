import assert from "node:assert/strict";
import { test } from "node:test";

import { ALPHABET, generateName } from "../src/names.js";

test("appends five characters from the alphabet", () => {
  const name = generateName("web-");
  assert.equal(name.length, 9);
  assert.ok(name.startsWith("web-"));
  assert.ok([...name.slice(4)].every((c) => ALPHABET.includes(c)));
  assert.notEqual(generateName("web-"), generateName("web-"));
});

test("cuts long bases to 58 bytes at a character boundary", () => {
  assert.equal(generateName("a".repeat(70)).length, 63);
  const accented = generateName("é".repeat(40));
  assert.equal(new TextEncoder().encode(accented).length, 58 + 5);
  assert.ok(accented.startsWith("é".repeat(29)));
});
