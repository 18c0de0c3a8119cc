"""kubectl's JSONPath templates as `karp get -o jsonpath=` renders them: each expected output below is what kubectl
v1.32 printed for the same object and template (`kubectl create --dry-run=client -o jsonpath=...`)."""

import pytest

from karpui.cli.jsonpath import JSONPathError, render

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "a", "labels": {"app": "z", "k.io/x": "1"}},
    "data": {"one": "1", "two": "2"},
}
NODES = {
    "items": [
        {"metadata": {"name": "n1", "labels": {"karpenter.sh/capacity-type": "spot"}}},
        {"metadata": {"name": "n2", "labels": {}}},
    ]
}


@pytest.mark.parametrize(
    ("template", "data", "printed"),
    [
        (
            '{range .data.*}<{@}>{end}{"\\n"}{.metadata.name}{"\\t"}x|{.data}',
            CONFIGMAP,
            '<1><2>\na\tx|{"one":"1","two":"2"}',
        ),
        ("{range .metadata.labels}{.app}{end}", CONFIGMAP, "z"),
        ("{.metadata.labels}", CONFIGMAP, '{"app":"z","k.io/x":"1"}'),
        ("{range .data.*}{@} {end}", CONFIGMAP, "1 2 "),
        ('{range .items[*]}{.metadata.name}{"\\n"}{end}', NODES, "n1\nn2\n"),
        (
            "{range .items[*]}{.metadata.name}/{.metadata.labels.karpenter\\.sh/capacity-type} {end}",
            NODES,
            "n1/spot n2/ ",
        ),
        ("{.items[*].metadata.name}", NODES, "n1 n2"),
        ("{range .items[*]}[{@.metadata.name}]{end}", NODES, "[n1][n2]"),
        ("{range .items[*]}{range .metadata.labels.*}{@};{end}{end}", NODES, "spot;"),
    ],
)
def test_templates_print_as_kubectl_prints_them(template: str, data: dict, printed: str) -> None:
    assert render(template, data) == printed


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{end}", "not in range, nothing to end"),
        ("{range .items[*]}{.a}", "unclosed action: range"),
        ('{"abc}', "unclosed action at '{\"abc}'"),
        ('{"\\q"}', "unrecognized string literal '\"\\\\q\"'"),
    ],
)
def test_a_bad_template_is_an_error_naming_what_is_wrong(template: str, error: str) -> None:
    with pytest.raises(JSONPathError) as raised:
        render(template, NODES)
    assert str(raised.value) == error
