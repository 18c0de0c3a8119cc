"""The official Kubernetes client's ApiClient, Configuration, ApiException and config loading, imported without the
generated API classes and models that `import kubernetes.client` loads."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


def _official_client() -> tuple[Any, Any]:
    """`kubernetes.client` with only its ApiClient, Configuration and ApiException, and `kubernetes.config`.

    The adapters send and read JSON as dicts, so the typed API classes and models that `import kubernetes.client`
    loads are never used, and they were most of that import's memory (61 MiB against 32 for these alone). Where the
    whole package is already imported (a process that uses its typed API too), it is used as it is.

    The modules needed (configuration, exceptions, rest, api_client, and config) are imported under stand-ins for
    their packages, which are taken out of sys.modules again at once: a later `import kubernetes` then imports the
    packages whole and finds those modules in place (one ApiClient class, one ApiException). A model looked up
    through the stand-in's `models` (the ApiClient's deserialising, which `_preload_content=False` never reaches)
    imports the real ones then."""
    if "kubernetes.client" in sys.modules and hasattr(sys.modules["kubernetes.client"], "CoreV1Api"):
        from kubernetes import client, config

        return client, config
    stand_ins: dict[str, types.ModuleType] = {}
    for name in ("kubernetes", "kubernetes.client"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name} not found")
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations)
        stand_ins[name] = sys.modules[name] = package
    models = types.ModuleType("kubernetes.client.models")
    models.__getattr__ = lambda attr: getattr(importlib.import_module("kubernetes.client.models"), attr)  # type: ignore[method-assign]
    stand_ins["kubernetes.client.models"] = sys.modules["kubernetes.client.models"] = models
    lean = stand_ins["kubernetes.client"]
    stand_ins["kubernetes"].client = lean  # type: ignore[attr-defined]
    lean.models = models  # type: ignore[attr-defined]
    try:
        lean.Configuration = importlib.import_module("kubernetes.client.configuration").Configuration  # type: ignore[attr-defined]
        lean.ApiException = importlib.import_module("kubernetes.client.exceptions").ApiException  # type: ignore[attr-defined]
        lean.ApiClient = importlib.import_module("kubernetes.client.api_client").ApiClient  # type: ignore[attr-defined]
        config = importlib.import_module("kubernetes.config")
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
    return lean, config


client, config = _official_client()
