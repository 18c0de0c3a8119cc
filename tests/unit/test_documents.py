import pytest

from provisioner.manifests import ManifestError, load_documents


def test_documents_are_numbered_and_empty_ones_skipped():
    documents = load_documents("---\napiVersion: v1\nkind: A\n---\n---\napiVersion: v1\nkind: B\n")
    assert [(d.index, d.kind) for d in documents] == [(1, "A"), (2, "B")]


def test_lists_are_expanded():
    documents = load_documents(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: A}\n- {apiVersion: v1, kind: B}\n"
    )
    assert [d.kind for d in documents] == ["A", "B"]


def test_malformed_yaml_says_where():
    with pytest.raises(ManifestError, match=r"malformed YAML at line 4, column 1: did not find expected ',' or '\]'$"):
        load_documents("apiVersion: v1\nkind: A\nspec: [1, 2\n")


def test_missing_kind_is_named():
    with pytest.raises(ManifestError) as raised:
        load_documents("apiVersion: v1\nmetadata: {}\n")
    assert (raised.value.field, raised.value.document) == ("kind", 1)


def test_python_object_tags_are_not_constructed():
    with pytest.raises(ManifestError, match="unsupported YAML tag tag:yaml.org,2002:python/object/apply:os.system"):
        load_documents("!!python/object/apply:os.system ['true']\n")


def test_scalars_are_not_objects():
    with pytest.raises(ManifestError, match="expected an object"):
        load_documents("just a string\n")
