"""Names and owner references as Kubernetes controllers make them (generateName's alphabet, controller refs)."""

from __future__ import annotations

import random
from typing import Any

from provisioner.cluster.objects import Obj

NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet


def random_suffix(rng: random.Random, length: int = 5) -> str:
    return "".join(rng.choice(NAME_CHARS) for _ in range(length))


def owner_reference(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
