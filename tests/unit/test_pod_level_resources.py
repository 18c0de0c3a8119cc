"""A pod's requests with pod-level resources (spec.resources), as Kubernetes' PodRequests and the API server's
defaulting make them."""

from __future__ import annotations

from provisioner.manifests.pod import pod_from_manifest
from provisioner.quantity import parse_resources


def requests_of(spec: dict) -> dict[str, int]:
    spec = {"containers": [{"name": "c", "image": "pause"}], **spec}
    return pod_from_manifest({"metadata": {"name": "p", "uid": "u"}, "spec": spec}).requests


def container(**requests: str) -> dict:
    return {"name": "c", "image": "pause", "resources": {"requests": requests}}


def test_pod_level_requests_replace_the_containers_for_the_resources_they_set():
    spec = {"resources": {"requests": {"cpu": "3"}}, "containers": [container(cpu="1", memory="1Gi")]}
    assert requests_of(spec) == parse_resources({"cpu": "3", "memory": "1Gi"})


def test_a_pod_level_limit_without_a_request_is_the_request_where_no_container_asks():
    spec = {"resources": {"limits": {"cpu": "4", "memory": "2Gi"}}, "containers": [container(cpu="1")]}
    assert requests_of(spec) == parse_resources({"cpu": "1", "memory": "2Gi"})


def test_only_cpu_memory_and_hugepages_are_pod_level():
    spec = {
        "resources": {"requests": {"cpu": "2", "fake.com/vendor-a": "3"}},
        "containers": [container(cpu="1", **{"fake.com/vendor-a": "1"})],
    }
    assert requests_of(spec) == parse_resources({"cpu": "2", "fake.com/vendor-a": "1"})


def test_overhead_is_added_to_pod_level_requests():
    spec = {"resources": {"requests": {"cpu": "2"}}, "overhead": {"cpu": "250m"}, "containers": [container(cpu="1")]}
    assert requests_of(spec) == parse_resources({"cpu": "2250m"})


def test_pod_level_requests_win_over_a_larger_init_container():
    spec = {
        "resources": {"requests": {"memory": "1Gi"}},
        "initContainers": [container(memory="3Gi")],
        "containers": [container(memory="512Mi")],
    }
    assert requests_of(spec) == parse_resources({"memory": "1Gi"})
