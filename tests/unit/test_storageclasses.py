"""The default StorageClass a claim without a class gets, as kube-apiserver's DefaultStorageClass admission picks it."""

from provisioner.cluster.storageclasses import default_class, has_class


def storage_class(name, created="2026-01-01T00:00:00Z", default="true", beta=False):
    key = "storageclass.beta.kubernetes.io/is-default-class" if beta else "storageclass.kubernetes.io/is-default-class"
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": {key: default}}}


def test_the_newest_class_marked_default_wins_and_the_first_by_name_among_equals():
    classes = [
        storage_class("old", "2026-01-01T00:00:00Z"),
        storage_class("b-new", "2026-02-01T00:00:00Z"),
        storage_class("a-new", "2026-02-01T00:00:00Z", beta=True),
        storage_class("newest-but-not-default", "2026-03-01T00:00:00Z", default="false"),
    ]
    assert default_class(classes) == "a-new"


def test_no_class_marked_default_gives_none():
    assert default_class([storage_class("gp3", default="false")]) is None


def test_a_claim_asking_for_no_class_has_asked_for_one():
    assert has_class({"metadata": {}, "spec": {"storageClassName": ""}})
    assert has_class({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "gp3"}}, "spec": {}})
    assert not has_class({"metadata": {}, "spec": {}})
