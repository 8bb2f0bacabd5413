import re

import pytest

from kubewasm.conditions import (
    find_condition,
    now_rfc3339,
    remove_condition,
    rfc3339,
    set_condition,
)


def test_formats_rfc3339():
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert rfc3339(951_782_400) == "2000-02-29T00:00:00Z"
    assert rfc3339(1_714_564_800.999) == "2024-05-01T12:00:00Z"
    assert rfc3339(4_102_444_799) == "2099-12-31T23:59:59Z"
    assert rfc3339(-5) == "1970-01-01T00:00:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now_rfc3339())


def test_keeps_transition_time_while_status_holds():
    conditions = [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": "2020-01-01T00:00:00Z",
            "reason": "Ok",
            "message": "",
        }
    ]
    assert not set_condition(conditions, "Ready", True, "Ok", "", 1)
    assert set_condition(conditions, "Ready", "True", "Ok", "newer", 2)
    assert conditions[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert conditions[0]["observedGeneration"] == 2
    assert set_condition(conditions, "Ready", False, "")
    assert conditions[0]["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    assert conditions[0]["reason"] == "Unspecified"
    assert "observedGeneration" not in conditions[0]
    assert set_condition(conditions, "Synced", "Unknown", "Wait")
    assert len(conditions) == 2
    assert find_condition(conditions, "Synced")["status"] == "Unknown"
    assert remove_condition(conditions, "Synced")
    assert not remove_condition(conditions, "Synced")
    assert find_condition(conditions, "Synced") is None


def test_rejects_unknown_statuses():
    with pytest.raises(ValueError):
        set_condition([], "Ready", "yes", "Ok")
