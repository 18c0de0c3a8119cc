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
    their packages; then every `kubernetes` module is taken out of sys.modules again, so that a later `import
    kubernetes` (a test using the typed client) imports the whole package afresh, as if nothing had been imported:
    its modules are then copies of their own, and the adapters keep using theirs (a transport's ApiClient raises its
    own module's ApiException, which is the one the transport catches)."""
    if "kubernetes.client" in sys.modules and hasattr(sys.modules["kubernetes.client"], "CoreV1Api"):
        from kubernetes import client, config

        return client, config
    before = {name for name in sys.modules if name == "kubernetes" or name.startswith("kubernetes.")}
    packages: dict[str, types.ModuleType] = {}
    try:
        for name in ("kubernetes", "kubernetes.client"):
            spec = importlib.util.find_spec(name)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"{name} not found")
            packages[name] = sys.modules[name] = types.ModuleType(name)
            packages[name].__path__ = list(spec.submodule_search_locations)
        # The ApiClient's deserialising (which `_preload_content=False` never reaches) looks models up here.
        models = sys.modules["kubernetes.client.models"] = types.ModuleType("kubernetes.client.models")
        models.__getattr__ = lambda attr: getattr(importlib.import_module("kubernetes.client.models"), attr)  # type: ignore[method-assign]
        lean = packages["kubernetes.client"]
        packages["kubernetes"].client = lean  # type: ignore[attr-defined]
        lean.models = models  # type: ignore[attr-defined]
        lean.Configuration = importlib.import_module("kubernetes.client.configuration").Configuration  # type: ignore[attr-defined]
        lean.ApiException = importlib.import_module("kubernetes.client.exceptions").ApiException  # type: ignore[attr-defined]
        lean.ApiClient = importlib.import_module("kubernetes.client.api_client").ApiClient  # type: ignore[attr-defined]
        lean.rest = importlib.import_module("kubernetes.client.rest")  # type: ignore[attr-defined]
        config = importlib.import_module("kubernetes.config")
    finally:
        for name in [n for n in sys.modules if n == "kubernetes" or n.startswith("kubernetes.")]:
            if name not in before:
                del sys.modules[name]
    return lean, config


client, config = _official_client()
