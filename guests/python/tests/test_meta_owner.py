from kubewasm import ObjectKey, meta, owner

OWNER = {
    "apiVersion": "kubewasm.dev/v1alpha1",
    "kind": "PodSet",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
}


def test_reads_metadata():
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 3,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"app": "web", "bad": 1},
        }
    }
    assert meta.name(pod) == "p"
    assert meta.namespace(pod) == "ns"
    assert meta.uid(pod) == "u"
    assert meta.resource_version(pod) == "7"
    assert meta.generation(pod) == 3
    assert meta.creation_timestamp(pod) == "2024-01-01T00:00:00Z"
    assert not meta.is_deleting(pod)
    assert meta.labels(pod) == {"app": "web"}
    assert meta.key(pod) == ObjectKey("ns", "p")


def test_missing_or_mistyped_metadata_reads_as_absent():
    assert meta.key({}) is None
    assert meta.labels(None) == {}
    assert meta.name({"metadata": "x"}) is None
    assert meta.generation({"metadata": {"generation": "3"}}) is None
    assert meta.is_deleting({"metadata": {"deletionTimestamp": "2024-01-02T00:00:00Z"}})


def test_finds_the_controller():
    reference = owner.controller_reference_to(OWNER)
    child = {
        "metadata": {
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u0"},
                {"bogus": True},
                reference,
            ],
        }
    }
    assert len(owner.owner_references(child)) == 2
    assert owner.controller_ref(child)["name"] == "web"
    assert owner.controller_owner_of(child) == ObjectKey("ns", "web")
    assert owner.is_controlled_by(child, "u1")
    assert not owner.is_controlled_by(child, "u0")


def test_orphans_have_no_controller():
    orphan = {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "o",
                    "uid": "u0",
                    "controller": False,
                }
            ]
        }
    }
    assert owner.controller_ref(orphan) is None
    assert owner.controller_owner_of({}) is None
    assert owner.controller_reference_to({"kind": "X"}) is None


def test_controller_reference_in_api_shape():
    assert owner.controller_reference_to(OWNER) == {
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "PodSet",
        "name": "web",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
