"""The SDK against the vectors that k8s.io/apimachinery computed (guests/vectors)."""

import copy
import json
from pathlib import Path

import pytest

from kubewasm import conditions, selector

VECTORS = Path(__file__).resolve().parents[2] / "vectors"


def vectors(name: str) -> list[dict]:
    return json.loads((VECTORS / f"{name}.json").read_text())["vectors"]


def rejects(call) -> bool:
    try:
        call()
    except selector.SelectorError:
        return True
    return False


@pytest.mark.parametrize("vector", vectors("selectors"), ids=lambda vector: vector["name"])
def test_selector_agrees_with_apimachinery(vector):
    given = vector["selector"]
    rejected = [
        rejects(lambda: selector.validate(given)),
        rejects(lambda: selector.to_query(given)),
        rejects(lambda: selector.matches(given, {})),
    ]
    assert rejected == [vector["error"]] * 3
    if vector["error"]:
        return
    assert selector.is_empty(given) == vector["empty"]
    assert selector.to_query(given) == vector["query"]
    cases = vector["matches"]
    assert [{**case, "match": selector.matches(given, case["labels"])} for case in cases] == cases


def perform(listed: list[dict], step: dict) -> dict:
    """Performs ``step`` on ``listed``; returns the answers in the shape of the vector's."""
    op, type_ = step["op"], step.get("type")
    if op == "set":
        given = step["condition"]
        changed = conditions.set_condition(
            listed,
            given["type"],
            given["status"],
            given["reason"],
            given["message"],
            given.get("observedGeneration"),
            last_transition_time=given["lastTransitionTime"],
        )
        return {"changed": changed, "conditions": copy.deepcopy(listed)}
    if op == "remove":
        removed = conditions.remove_condition(listed, type_)
        return {"removed": removed, "conditions": copy.deepcopy(listed)}
    if op == "find":
        return {"found": conditions.find_condition(listed, type_)}
    if op == "isTrue":
        return {"result": conditions.is_condition_true(listed, type_)}
    if op == "isFalse":
        return {"result": conditions.is_condition_false(listed, type_)}
    if op == "isPresentAndEqual":
        return {"result": conditions.is_condition_present_and_equal(listed, type_, step["status"])}
    raise ValueError(f"unknown step {op}")


@pytest.mark.parametrize("vector", vectors("conditions"), ids=lambda vector: vector["name"])
def test_conditions_agree_with_apimachinery(vector):
    listed = copy.deepcopy(vector["conditions"])
    for index, step in enumerate(vector["steps"]):
        want = {k: v for k, v in step.items() if k not in ("op", "type", "condition", "status")}
        assert perform(listed, step) == want, f"step {index}: {step}"
