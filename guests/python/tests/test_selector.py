import pytest

from kubewasm.selector import SelectorError, is_empty, matches, to_query, validate


def test_empty_selector_matches_everything_no_selector_nothing():
    assert is_empty({})
    assert is_empty({"matchLabels": {}, "matchExpressions": []})
    assert matches({}, {})
    assert to_query({}) == ""
    assert not is_empty(None)
    assert not matches(None, {"app": "web"})
    assert to_query(None) == ""


def test_match_labels_need_exact_values():
    selector = {"matchLabels": {"app": "web", "tier": "fe"}}
    assert not is_empty(selector)
    assert matches(selector, {"app": "web", "tier": "fe", "x": "y"})
    assert not matches(selector, {"app": "web"})
    assert not matches(selector, {"app": "db", "tier": "fe"})


def test_match_expressions():
    selector = {
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "app", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []},
        ]
    }
    assert matches(selector, {"env": "prod", "app": "a"})
    assert matches(selector, {"env": "staging", "app": "a", "track": "stable"})
    assert not matches(selector, {"env": "dev", "app": "a"})
    assert not matches(selector, {"env": "prod", "app": "a", "track": "canary"})
    assert not matches(selector, {"env": "prod"})
    assert not matches(selector, {"env": "prod", "app": "a", "legacy": ""})
    assert to_query(selector) == "app,env in (prod,staging),!legacy,track notin (canary)"


def test_query_sorts_keeping_duplicates():
    selector = {
        "matchLabels": {"tier": "fe", "app": "web"},
        "matchExpressions": [{"key": "b", "operator": "In", "values": ["y", "x", "y"]}],
    }
    assert to_query(selector) == "app=web,b in (x,y,y),tier=fe"


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"operator": "Exists"}]},
        {"matchLabels": {"a": 1}},
        {"matchLabels": ["a"]},
        "app=web",
    ],
)
def test_rejects_invalid_selectors(selector):
    with pytest.raises(SelectorError, match="invalid label selector"):
        matches(selector, {"a": "x"})
    with pytest.raises(SelectorError):
        to_query(selector)
    with pytest.raises(SelectorError):
        validate(selector)


def test_names_the_bad_operator():
    bad = {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}
    with pytest.raises(SelectorError, match='key "app": unknown operator "Near"'):
        validate(bad)
