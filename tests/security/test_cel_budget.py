"""CEL device selectors cannot hurt: refused at apply when they cannot work or cost too much, and at evaluation a
selector that errors or runs over budget does not match and says why, never raising into a reconcile."""

import time
from dataclasses import replace

import pytest

from provisioner.dra.cel import COST_LIMIT, CELError, Device, Verdict, compile_selector, evaluate, matches, validate
from provisioner.dra.celcheck import DeviceBounds, analyse
from provisioner.dra.claims import DeviceClass, DeviceRequest, allocate, device_class_from_manifest
from provisioner.manifests import ManifestError

GPU = Device.from_spec(
    {
        "name": "gpu-0",
        "attributes": {"model": {"string": "a100"}, "example.com/pcie": {"int": 3}},
        "capacity": {"memory": {"value": "40Gi"}},
    },
    "gpu.example.com",
    "pool-a",
)
THIRTY = "[" + ",".join(str(i) for i in range(30)) + "]"


def comprehension(depth):
    """`[0..29].all(x0, [0..29].all(x1, ... x0 >= 0))`: 30^depth steps."""
    body = "x0 >= 0"
    for level in range(depth):
        body = f"{THIRTY}.all(x{level}, {body})"
    return body


def device_class(expression):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver != ""'}}, {"cel": {"expression": expression}}]},
    }


def test_a_thirty_to_the_fifth_comprehension_is_refused_at_apply_naming_the_field():
    with pytest.raises(ManifestError) as raised:
        device_class_from_manifest(device_class(comprehension(5)))
    assert raised.value.field == "spec.selectors[1].cel.expression"
    assert raised.value.message == (
        f"invalid CEL expression: too complex, exceeds cost limit: estimated cost 223727581, limit {COST_LIMIT}"
    )


def test_the_most_a_budget_admits_still_runs_quickly():
    # 30^3 steps fit the budget; 30^4 do not (~0.45 s in this evaluator).
    validate(comprehension(3))
    with pytest.raises(CELError, match="too complex"):
        validate(comprehension(4))
    assert compile_selector(comprehension(3)).analysis.cost == 248581


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("foo(device.driver)", "line 1, column 1: undeclared reference to 'foo'"),
        ('device.driver.lowerAscii() == "a"', "line 1, column 14: undeclared reference to 'lowerAscii'"),
        ("cel.bind(x, device.driver, x == 'a')", "line 1, column 1: undeclared reference to 'cel.bind'"),
        ("gpu > 1", "line 1, column 1: undeclared reference to 'gpu'"),
        (
            "device.model == 'a'",
            "line 1, column 7: undefined field 'model' (device has driver, attributes, capacity, "
            "allowMultipleAllocations)",
        ),
        ("1 + 2", "must evaluate to bool, got int"),
        ('"a" + device.driver', "must evaluate to bool, got string"),
        ("9223372036854775807 + 1 > 0", "evaluation error: Arithmetic overflow in 'add' on 9223372036854775807 and 1."),
        ("1 / 0 == 1", "evaluation error: division by zero in CEL expression"),
        ("(" * 40 + "true" + ")" * 40, "line 1, column 33: nested deeper than 32 levels"),
    ],
)
def test_selectors_that_cannot_work_are_refused_at_apply(expression, message):
    with pytest.raises(CELError) as raised:
        validate(expression)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.example.com"].all(name, name.size() < 64)',
        '[1, 2, 3].map(x, x * 2).exists(y, y == 4) && device.driver.startsWith("gpu")',
        'has(device.attributes["gpu.example.com"].model) ? device.attributes["gpu.example.com"].model == "a100" : false',
        'device.capacity["gpu.example.com"].memory.isInteger() && device.capacity["gpu.example.com"].memory.sign() > 0',
        'string(device.attributes["gpu.example.com"].model).matches("^a[0-9]+$") // a comment',
        "type(device.driver) == string && r'\\d' != b'x'.string()",
    ],
)
def test_ordinary_selectors_pass_the_checks(expression):
    validate(expression)
    assert compile_selector(expression).analysis.cost < 5000


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ('device.capacity["gpu.example.com"].memory / 0 == 1', "CEL runtime error: division by zero in CEL expression"),
        (
            'device.attributes["example.com"].pcie + 9223372036854775807 > 0',
            "CEL runtime error: Arithmetic overflow in 'add' on 3 and 9223372036854775807.",
        ),
        ('device.attributes["gpu.example.com"].model', "must evaluate to bool, got string"),
    ],
)
def test_a_selector_that_errors_on_a_device_does_not_match_and_says_why(expression, error):
    assert evaluate(expression, GPU) == Verdict(False, error)
    assert matches(expression, GPU) is False


def test_allocation_reports_the_selector_error_instead_of_raising():
    broken = DeviceClass("gpu", ('device.capacity["gpu.example.com"].memory / 0 == 1',))
    outcome = allocate([DeviceRequest("c", "gpu", "gpu")], [GPU, replace(GPU, name="gpu-1")], {"gpu": broken})
    assert outcome == (
        'cannot allocate request "gpu" of claim "c" (DeviceClass gpu): 0 matching device(s) free, 1 needed; '
        'device "gpu-0": CEL runtime error: division by zero in CEL expression (and 1 more)'
    )


def test_a_device_larger_than_kubernetes_allows_is_judged_by_its_own_size():
    # Accepted for devices of at most 32 attributes; a device published with 2,000 (no apply checked it) would
    # make this walk 2,000 x 2,000 names, so it is refused on that device rather than run.
    expression = (
        'device.attributes["gpu.example.com"].all(a, device.attributes["gpu.example.com"].all(b, a != b || a == b))'
    )
    validate(expression)
    huge = Device.from_spec(
        {"name": "huge", "attributes": {f"a{i}": {"int": i} for i in range(2000)}}, "gpu.example.com"
    )
    start = time.perf_counter()
    verdict = evaluate(expression, huge)
    assert time.perf_counter() - start < 1.0  # refused from the estimate, not after running
    assert verdict.matched is False
    assert verdict.error.startswith("CEL cost limit exceeded: estimated cost ")
    assert evaluate(expression, GPU).matched is True


def test_the_estimate_grows_with_the_device_bounds():
    expression = 'device.attributes["gpu.example.com"].all(a, a.size() > 0)'
    tree = compile_selector(expression).tree
    small = analyse(expression, tree, DeviceBounds(domains=1, entries=2, text=8)).cost
    large = analyse(expression, tree, DeviceBounds()).cost
    assert small < large
