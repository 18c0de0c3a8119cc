"""TypeIndex applies Karpenter's Requirements.Intersects to instance types whose requirements a label cannot say:
several values for a key, or none (DoesNotExist)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.typeindex import TypeIndex
from tests.builders import instance_type, r

SPECIAL = "example.com/special"
OS = "kubernetes.io/os"

PLAIN = instance_type("plain", "2", "4Gi")  # linux, and says nothing of `special`
WITHOUT = replace(instance_type("without", "2", "4Gi"), extra_requirements=(Requirement(SPECIAL, frozenset()),))
WITH = replace(
    instance_type("with", "8", "16Gi"),
    labels={},  # its OSes below, not the builder's single linux label
    extra_requirements=(
        Requirement(SPECIAL, frozenset({"optional"})),
        Requirement(OS, frozenset({"linux", "windows"})),
    ),
)
INDEX = TypeIndex([PLAIN, WITHOUT, WITH])


def names(*requirements: Requirement) -> list[str]:
    return sorted(it.name for it in INDEX.members(INDEX.compatible(Requirements(requirements))))


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (r(SPECIAL, "Exists"), ["plain", "with"]),  # a DoesNotExist type cannot have it
        (r(SPECIAL, "In", "optional"), ["plain", "with"]),
        (r(SPECIAL, "NotIn", "optional"), ["plain", "without"]),  # NotIn holds where the key is absent
        (r(SPECIAL, "DoesNotExist"), ["plain", "without"]),
    ],
)
def test_a_type_whose_key_does_not_exist_intersects_only_negative_requirements(requirement, expected):
    assert names(requirement) == expected


@pytest.mark.parametrize(
    ("os", "expected"), [("linux", ["plain", "with", "without"]), ("windows", ["with"]), ("darwin", [])]
)
def test_a_type_with_several_values_for_a_key_matches_any_of_them(os, expected):
    assert names(r(OS, "In", os)) == expected


def test_the_extra_requirements_join_the_types_requirements():
    assert WITHOUT.requirements[SPECIAL].operator == "DoesNotExist"
    assert WITH.requirements[OS].values == frozenset({"linux", "windows"})
