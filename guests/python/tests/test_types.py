import pytest

import kubewasm
from kubewasm import Gvk, Mapping, Metadata, ObjectKey, Selection

CONFIG_MAP = Gvk("", "v1", "ConfigMap")


def test_api_versions_round_trip():
    deployment = Gvk.from_api_version("apps/v1", "Deployment")
    assert deployment == Gvk("apps", "v1", "Deployment")
    assert deployment.api_version == "apps/v1"
    assert str(deployment) == "apps/v1, Kind=Deployment"
    pod = Gvk.from_api_version("v1", "Pod")
    assert (pod.group, pod.api_version) == ("", "v1")


def test_metadata_builder():
    secret = Selection(Gvk("", "v1", "Secret")).in_namespace("ns").with_label_selector("a=b")
    declared = (
        Metadata("x", Gvk("a.io", "v1", "Thing"))
        .own(Gvk("", "v1", "Pod"))
        .watch(secret, Mapping.label("thing"))
        .watch(Gvk("", "v1", "Node"), Mapping.guest())
        .with_finalizer("a.io/cleanup")
        .with_max_concurrency(0)
        .resync_every(1.5)
        .with_reconcile_on("generation", "annotations")
    )
    assert declared.primary == Selection(Gvk("a.io", "v1", "Thing"))
    assert declared.max_concurrency == 1
    assert declared.resync_seconds == 1
    assert declared.owns == [Gvk("", "v1", "Pod")]
    assert declared.watches[0].selection.namespace == "ns"
    assert declared.watches[0].selection.label_selector == "a=b"
    assert declared.watches[0].mapping == Mapping("label", "thing")
    assert declared.watches[1].selection == Selection(Gvk("", "v1", "Node"))
    assert declared.finalizer == "a.io/cleanup"
    assert declared.reconcile_on == {"generation", "annotations"}


def test_metadata_keywords():
    declared = Metadata("x", CONFIG_MAP, max_concurrency=-3, resync_seconds=60)
    assert declared.max_concurrency == 1
    assert declared.resync_seconds == 60
    assert declared.owns == [] and declared.watches == []
    assert declared.reconcile_on == {"any"}
    assert Metadata("x", CONFIG_MAP, reconcile_on=["labels"]).reconcile_on == {"labels"}
    assert Metadata("x", CONFIG_MAP, reconcile_on="generation").reconcile_on == {"generation"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"spec", "labels"}, "reconcile_on: unknown changes spec; use generation, labels, "),
        ((), "reconcile_on: no change; use generation, labels, annotations, any"),
    ],
)
def test_reconcile_on_takes_the_names_of_the_flags_only(changes, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        Metadata("x", CONFIG_MAP, reconcile_on=changes)
    with pytest.raises(ValueError, match=f"^{message}"):
        Metadata("x", CONFIG_MAP).with_reconcile_on(*changes)


def test_object_keys_print_like_kubectl():
    assert str(ObjectKey("ns", "n")) == "ns/n"
    assert str(ObjectKey(None, "n")) == "n"


def test_host_calls_raise_outside_a_component():
    with pytest.raises(kubewasm.OutsideHostError):
        kubewasm.cache.get(Gvk("", "v1", "Pod"), "ns", "p")
    with pytest.raises(kubewasm.OutsideHostError):
        kubewasm.log.info("hello", key="value")
