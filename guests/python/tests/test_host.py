"""The conversions into the WIT records, over stand-ins for the bindings componentize-py
generates (records take their fields in order or by name, ``changes`` is an ``enum.Flag``)."""

import enum
from types import SimpleNamespace

import pytest

import kubewasm
from kubewasm import Gvk, Metadata, _host

CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}


class Changes(enum.Flag):
    GENERATION = enum.auto()
    LABELS = enum.auto()
    ANNOTATIONS = enum.auto()
    ANY = enum.auto()


def record(*fields, **named):
    return fields or named


@pytest.fixture
def writes(monkeypatch):
    """Records the writes as (function, options); each returns the object it was given."""
    calls = []

    def write(name):
        def call(obj, options):
            calls.append((name, options))
            return obj

        return call

    bindings = SimpleNamespace(
        ApplyOptions=record,
        StatusOptions=record,
        apply=write("apply"),
        apply_status=write("apply_status"),
    )
    monkeypatch.setattr(_host, "writes", bindings)
    return calls


def test_declares_the_changes_to_reconcile_on(monkeypatch):
    bindings = SimpleNamespace(
        Changes=Changes, ControllerMetadata=record, Gvk=record, Selection=record
    )
    monkeypatch.setattr(_host, "types", bindings)
    thing = Gvk("a.io", "v1", "Thing")
    assert _host.metadata(Metadata("x", thing))[-1] == Changes.ANY
    declared = Metadata("x", thing).with_reconcile_on("labels", "generation")
    assert _host.metadata(declared)[-1] == Changes.GENERATION | Changes.LABELS


def test_applies_are_owned_and_forced_and_adopt_only_when_asked(writes):
    assert kubewasm.apply(CONFIG_MAP) == CONFIG_MAP
    kubewasm.apply(CONFIG_MAP, owned=False)
    kubewasm.apply(CONFIG_MAP, adopt=True)
    assert writes == [
        ("apply", {"owned": True, "force": True, "adopt": False}),
        ("apply", {"owned": False, "force": True, "adopt": False}),
        ("apply", {"owned": True, "force": True, "adopt": True}),
    ]


def test_status_applies_are_forced_only_when_asked(writes):
    assert kubewasm.apply_status(CONFIG_MAP) == CONFIG_MAP
    kubewasm.apply_status(CONFIG_MAP, force=True)
    assert writes == [("apply_status", {"force": False}), ("apply_status", {"force": True})]
