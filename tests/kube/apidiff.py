"""The lab's Kubernetes API held to kube-apiserver: one request corpus — what kubectl 1.32, the official Python client,
lightkube 1.0 and kr8s 0.20 (their sync APIs) send for get, list (by label, by field), watch, create, apply (client- and
server-side), patch, scale (the Scale subresource and a patch of the object), taint, cordon, drain, delete with each
propagation and of a collection, dry-run, and the errors (404, 409, 422, 410, 403, 415) — run against both servers
through recording proxies, and their answers compared where clients read them: the status code, the kind, a Status's
reason and details, an object's identity and the fields each verb reads (replicas, taints, deletion), a list's names, a
table's columns, and a watch's events in order. Discovery and OpenAPI fetches, which differ in number between servers
that serve different versions, are left out of the pairing.

    python -m tests.kube.apidiff --real KUBECONFIG --lab URL TOKEN     print every difference, one per line

`compare()` is what tests/kube/test_api_parity.py runs in CI; `KNOWN` is every difference the lab keeps, with its
reason (README.md lists them too)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.kube.faults import Exchange, FaultProxy

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
NAMESPACE = "corpus"
DISCOVERY = ("/api", "/apis", "/openapi/", "/version")

# Differences the lab keeps, each with why: (step, what differs) -> reason. A difference not here is a failure.
NODE_TAINTS = (
    "a lab's Nodes carry no node.kubernetes.io/not-ready or /unschedulable taint: kube-apiserver's TaintNodesByCondition "
    "admission taints a new Node not-ready until its kubelet reports Ready, and kube-controller-manager's node "
    "lifecycle controller taints a cordoned one unschedulable; the lab's kwok nodes are Ready as they are made, and "
    "its scheduler reads spec.unschedulable itself"
)
KNOWN: dict[tuple[str, str], str] = {
    ("create a node", "POST /api/v1/nodes answer"): NODE_TAINTS,
    ("drain (no pods)", "GET /api/v1/nodes/corpus-node answer"): NODE_TAINTS,
    ("uncordon", "GET /api/v1/nodes/corpus-node answer"): NODE_TAINTS,
    ("create namespace (protobuf)", "POST /api/v1/namespaces status"): (
        "the lab does not decode protobuf (415 naming the types it takes; README: use kubectl create -f or apply); "
        "kubectl 1.32's typed clients send it for create namespace, though not on every run"
    ),
    ("impersonate nobody (403)", "GET /api/v1/namespaces/corpus/pods answer"): (
        "karpui impersonates only an active karpui user (whose permissions it can then apply): a name it has no "
        "account for is refused as the impersonation (403 on users), where kube-apiserver takes any name and its "
        "RBAC then refuses the request (403 on pods)"
    ),
}
# Known differences a run may not meet (which content type kubectl's typed client sends is its own choice).
OCCASIONAL = frozenset({("create namespace (protobuf)", "POST /api/v1/namespaces status")})


# Servers ----------------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One side of the comparison: a recording proxy in front of an API server, and clients of the proxy."""

    name: str
    proxy: FaultProxy
    folder: Path
    prepare_410: Callable[[], None] = lambda: None  # make a version old enough to be gone (compaction)

    def __post_init__(self) -> None:
        self.proxy.record_bodies = True
        self.kubeconfig = self.folder / f"kubeconfig-{self.name}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {"server": self.proxy.url}}],
            "users": [{"name": "corpus", "user": {}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": "corpus"}}],
            "current-context": self.name,
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.cache = self.folder / f"kubectl-cache-{self.name}"
        self.step_start = 0  # the first of the proxy's exchanges that belongs to the step running

    @contextmanager
    def unrecorded(self) -> Iterator[None]:
        """A step's preparation, left out of its exchanges: waiting for a controller polls as often as it takes."""
        yield
        self.step_start = len(self.proxy.exchanges)

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [KUBECTL, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args]
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=60)

    def client(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.proxy.url
        return client.ApiClient(configuration)

    def lightkube(self) -> Any:
        from lightkube import Client, KubeConfig

        return Client(KubeConfig.from_file(self.kubeconfig))

    def kr8s(self) -> Any:
        import kr8s

        return kr8s.api(kubeconfig=str(self.kubeconfig))

    def watch_recorded(self, before: int, timeout: float = 10) -> None:
        """Wait until the proxy has recorded more watches than `before`: it records one once the watch has ended."""
        deadline = time.monotonic() + timeout
        while self.watches() <= before and time.monotonic() < deadline:
            time.sleep(0.05)

    def watches(self) -> int:
        return sum(1 for e in self.proxy.exchanges if "watch=" in e.path)


# The corpus -------------------------------------------------------------------------------------------------------


def deployment(name: str, replicas: int = 2, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name, **labels}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {"app": "single"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "corpus-node", "labels": {"corpus": "yes"}}}
NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "corpus-pool"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "corpus"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }
        },
    },
}
PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "guard", "namespace": NAMESPACE},
    "spec": {"minAvailable": 10, "selector": {"matchLabels": {"app": "single"}}},
}


def kubectl_steps() -> Iterator[tuple[str, Callable[[Server], Any]]]:
    """kubectl 1.32's requests, step by step (each step's exchanges are compared with the other server's)."""

    def run(*args: str, document: dict[str, Any] | list[dict[str, Any]] | None = None) -> Callable[[Server], Any]:
        text = None if document is None else json.dumps(document if isinstance(document, dict) else {
            "apiVersion": "v1", "kind": "List", "items": document})  # fmt: skip
        return lambda server: server.kubectl(*args, *(["-f", "-"] if text else []), input=text)

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    yield "apply a namespace", run("apply", document=namespace)
    yield "create namespace (protobuf)", run("create", "namespace", "corpus-other")
    yield "apply a deployment", run("apply", document=deployment("web"))
    yield "get a deployment as JSON", run("-n", NAMESPACE, "get", "deployment", "web", "-o", "json")
    yield "get deployments (table)", run("-n", NAMESPACE, "get", "deployments")
    yield "get a missing deployment (404)", run("-n", NAMESPACE, "get", "deployment", "nothere", "-o", "json")
    yield "create what exists (409)", run("create", document=deployment("web"))
    yield "apply an invalid deployment (422)", run("apply", document=deployment("bad", replicas=-1))
    yield "scale", run("-n", NAMESPACE, "scale", "deployment", "web", "--replicas=3")
    yield "label", run("-n", NAMESPACE, "label", "deployment", "web", "tier=front")
    yield "annotate", run("-n", NAMESPACE, "annotate", "deployment", "web", "note=hello")
    yield "merge patch", run("-n", NAMESPACE, "patch", "deployment", "web", "--type=merge", "-p",
                             '{"metadata":{"labels":{"patched":"merge"}}}')  # fmt: skip
    yield "json patch", run("-n", NAMESPACE, "patch", "deployment", "web", "--type=json", "-p",
                            '[{"op":"add","path":"/metadata/labels/patched","value":"json"}]')  # fmt: skip
    yield "strategic merge patch", run("-n", NAMESPACE, "patch", "deployment", "web", "-p",
                                       '{"spec":{"template":{"metadata":{"labels":{"app":"web","v":"2"}}}}}')  # fmt: skip
    yield "server-side apply", run("apply", "--server-side", "--field-manager=corpus",
                                   document=deployment("web", replicas=3, tier="back"))  # fmt: skip
    yield "server-side apply, conflicting (409)", run("apply", "--server-side", "--field-manager=other",
                                                      document=deployment("web", replicas=5))  # fmt: skip
    yield "apply --dry-run=server", run("apply", "--dry-run=server", document=deployment("dry"))
    yield "get the dry-run object (404)", run("-n", NAMESPACE, "get", "deployment", "dry", "-o", "json")
    yield "get --raw a pod list", run("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
    yield "get --raw a deployment", run("get", "--raw", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web")
    yield "create a node", run("create", document=NODE)
    yield "taint a node", run("taint", "node", "corpus-node", "key=value:NoSchedule")
    yield "taint it again (already)", run("taint", "node", "corpus-node", "key=value:NoSchedule")
    yield "remove the taint", run("taint", "node", "corpus-node", "key:NoSchedule-")
    yield "cordon", run("cordon", "corpus-node")
    yield "drain (no pods)", run("drain", "corpus-node", "--ignore-daemonsets", "--force", "--timeout=20s")
    yield "uncordon", run("uncordon", "corpus-node")
    yield "apply a NodePool", run("apply", document=NODEPOOL)
    yield "get nodepools (table)", run("get", "nodepools")
    yield "get nodeclaims (empty table)", run("get", "nodeclaims")
    yield "delete --dry-run=server", run("-n", NAMESPACE, "delete", "deployment", "web", "--dry-run=server")
    yield "delete a deployment (background)", run("-n", NAMESPACE, "delete", "deployment", "web", "--wait=false")
    yield "apply two more deployments", run("apply", document=[deployment("fg", 1), deployment("orphan", 1)])
    yield "delete, foreground", run("-n", NAMESPACE, "delete", "deployment", "fg", "--cascade=foreground",
                                    "--wait=false")  # fmt: skip
    yield "delete, orphan", run("-n", NAMESPACE, "delete", "deployment", "orphan", "--cascade=orphan", "--wait=false")
    yield "impersonate nobody (403)", run("--as=nobody@example.com", "-n", NAMESPACE, "get", "pods")
    yield "delete the node", run("delete", "node", "corpus-node", "--wait=false")
    yield "delete the NodePool", run("delete", "nodepool", "corpus-pool", "--wait=false")


def client_steps() -> Iterator[tuple[str, Callable[[Server], Any]]]:
    """The official Python client's requests."""
    from kubernetes import client, watch
    from kubernetes.client.rest import ApiException

    def call(work: Callable[[Any], Any]) -> Callable[[Server], Any]:
        def step(server: Server) -> Any:
            try:
                return work(server.client())
            except ApiException as error:
                return error.status

        return step

    def core(api: Any) -> Any:
        return client.CoreV1Api(api)

    yield "client: create a pod", call(lambda api: core(api).create_namespaced_pod(NAMESPACE, pod("single")))
    yield "client: read a pod", call(lambda api: core(api).read_namespaced_pod("single", NAMESPACE))
    yield "client: list pods, a page of 1", call(lambda api: core(api).list_namespaced_pod(NAMESPACE, limit=1))
    yield "client: read a missing pod (404)", call(lambda api: core(api).read_namespaced_pod("nothere", NAMESPACE))
    yield (
        "client: create what exists (409)",
        call(lambda api: core(api).create_namespaced_pod(NAMESPACE, pod("single"))),
    )
    yield (
        "client: create an invalid pod (422)",
        call(lambda api: core(api).create_namespaced_pod(NAMESPACE, {**pod("Bad_Name"), "spec": {"containers": []}})),
    )
    yield (
        "client: a PDB",
        call(lambda api: client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(NAMESPACE, PDB)),
    )

    def evict(api: Any) -> Any:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "single", "namespace": NAMESPACE}}
        return core(api).create_namespaced_pod_eviction("single", NAMESPACE, body)

    yield "client: evict a pod a PDB protects (429)", call(evict)
    yield (
        "client: read a deployment's scale",
        call(lambda api: client.AppsV1Api(api).read_namespaced_deployment_scale("orphan", NAMESPACE)),
    )
    yield "client: a watch of pods as one is made and deleted", _watched

    def stale_watch(server: Server) -> Any:
        server.prepare_410()
        stream = watch.Watch().stream(
            core(server.client()).list_namespaced_pod, NAMESPACE, resource_version="1", timeout_seconds=2
        )
        try:
            return [event["type"] for event in stream]
        except ApiException as error:
            return error.status

    yield "client: a watch from a version long gone (410)", stale_watch
    yield (
        "client: delete a pod at once",
        call(lambda api: core(api).delete_namespaced_pod("single", NAMESPACE, grace_period_seconds=0)),
    )


def closing_steps() -> Iterator[tuple[str, Callable[[Server], Any]]]:
    """The last: the namespace every step before worked in, deleted (by the official client)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    def delete_namespace(server: Server) -> Any:
        try:
            return client.CoreV1Api(server.client()).delete_namespace(NAMESPACE)
        except ApiException as error:
            return error.status

    yield "client: delete the namespace", delete_namespace


def _watched(server: Server) -> Any:
    """Watch the namespace's pods (from now) while a pod is made and deleted: the events, in order."""
    from kubernetes import client

    api = client.CoreV1Api(server.client())
    version = api.list_namespaced_pod(NAMESPACE).metadata.resource_version
    raw = server.client()
    seen: list[bytes] = []

    def watch() -> None:
        answer = raw.call_api(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            "GET",
            query_params=[("watch", "true"), ("resourceVersion", version), ("timeoutSeconds", "4")],
            _preload_content=False,
            auth_settings=["BearerToken"],
        )
        seen.append(answer[0].data)

    thread = threading.Thread(target=watch)
    thread.start()
    time.sleep(0.5)
    api.create_namespaced_pod(NAMESPACE, pod("watched"))
    time.sleep(0.5)
    api.delete_namespaced_pod("watched", NAMESPACE, grace_period_seconds=0)
    thread.join(15)
    return seen


def lightkube_steps() -> Iterator[tuple[str, Callable[[Server], Any]]]:
    """lightkube's requests (its sync Client; typed resources, so a dict goes through codecs.from_dict)."""
    from lightkube import ApiError, codecs
    from lightkube.models.autoscaling_v1 import ScaleSpec
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.apps_v1 import Deployment
    from lightkube.resources.core_v1 import Pod
    from lightkube.resources.policy_v1 import PodDisruptionBudget
    from lightkube.types import PatchType

    name, labels = "lightkube", {"corpus": "lightkube"}

    def call(work: Callable[[Any], Any]) -> Callable[[Server], Any]:
        def step(server: Server) -> Any:
            with server.lightkube() as api:
                try:
                    return work(api)
                except ApiError as error:
                    return error.status.code

        return step

    def made() -> Any:
        return codecs.from_dict(deployment(name, 1, **labels))

    yield "lightkube: create a deployment", call(lambda api: api.create(made()))
    yield "lightkube: get it", call(lambda api: api.get(Deployment, name, namespace=NAMESPACE))
    yield (
        "lightkube: list deployments by label",
        call(lambda api: list(api.list(Deployment, namespace=NAMESPACE, labels=labels))),
    )
    yield (
        "lightkube: server-side apply",
        call(lambda api: api.apply(codecs.from_dict(deployment(name, 1, **labels, tier="back")), field_manager=name)),
    )
    yield (
        "lightkube: merge patch",
        call(lambda api: api.patch(Deployment, name, {"metadata": {"labels": {"patched": "merge"}}},
                                   namespace=NAMESPACE, patch_type=PatchType.MERGE)),
    )  # fmt: skip
    yield (
        "lightkube: strategic merge patch",
        call(lambda api: api.patch(Deployment, name, {"metadata": {"annotations": {"note": "strategic"}}},
                                   namespace=NAMESPACE)),
    )  # fmt: skip

    def scaled(server: Server) -> Any:
        with server.lightkube() as api:
            # The Scale answered holds the Deployment's status.replicas: wait for its controllers to count its pod
            # first (kube-controller-manager can take seconds, just after the 410 step has restarted kube-apiserver).
            with server.unrecorded():
                _until(lambda: getattr(api.get(Deployment, name, namespace=NAMESPACE).status, "replicas", None) == 1)
            scale = Deployment.Scale(metadata=ObjectMeta(name=name, namespace=NAMESPACE), spec=ScaleSpec(replicas=3))
            return api.replace(scale, name, namespace=NAMESPACE)

    yield "lightkube: replace the Scale", scaled
    yield (
        "lightkube: get a missing deployment (404)",
        call(lambda api: api.get(Deployment, "nothere", namespace=NAMESPACE)),
    )
    yield "lightkube: create what exists (409)", call(lambda api: api.create(made()))

    def watched(server: Server) -> list[str]:
        with server.lightkube() as api:
            stream = api.watch(Pod, namespace=NAMESPACE, labels=labels)
            return _watch_while(
                server,
                ((kind, obj.metadata.name) for kind, obj in stream),
                make=lambda: api.create(codecs.from_dict(pod("lightkube-watched", **labels))),
                delete=lambda: api.delete(Pod, "lightkube-watched", namespace=NAMESPACE, grace_period=0),
            )

    yield "lightkube: a watch of pods by label as one is made and deleted", watched
    # lightkube's deletecollection takes no selector: the namespace's only PDB is the client's "guard".
    yield (
        "lightkube: delete a collection (the PDBs)",
        call(lambda api: api.deletecollection(PodDisruptionBudget, namespace=NAMESPACE)),
    )
    yield "lightkube: delete the deployment", call(lambda api: api.delete(Deployment, name, namespace=NAMESPACE))


def kr8s_steps() -> Iterator[tuple[str, Callable[[Server], Any]]]:
    """kr8s's requests (its sync API). 0.20 has no server-side apply, and patches only by merge or JSON patch; its
    get by name is a list with a field selector, and its scale a merge patch of the object, not its Scale."""
    import kr8s
    from kr8s.objects import Deployment, Pod

    name, labels = "kr8s", {"corpus": "kr8s"}

    def call(work: Callable[[Any], Any]) -> Callable[[Server], Any]:
        def step(server: Server) -> Any:
            try:
                return work(server.kr8s())
            except kr8s.ServerError as error:
                return error.response.status_code if error.response is not None else str(error)
            except kr8s.NotFoundError:
                return 404

        return step

    def made(api: Any) -> Any:
        return Deployment(deployment(name, 1, **labels), api=api)

    def existing(api: Any) -> Any:
        return Deployment(name, namespace=NAMESPACE, api=api)

    yield "kr8s: create a deployment", call(lambda api: made(api).create())
    yield "kr8s: get it by name", call(lambda api: Deployment.get(name, namespace=NAMESPACE, api=api))
    yield (
        "kr8s: list deployments by label",
        call(lambda api: list(api.get("deployments", namespace=NAMESPACE, label_selector=labels))),
    )
    yield "kr8s: merge patch", call(lambda api: existing(api).patch({"metadata": {"labels": {"patched": "merge"}}}))
    yield (
        "kr8s: json patch",
        call(lambda api: existing(api).patch([{"op": "add", "path": "/metadata/labels/patched", "value": "json"}],
                                             type="json")),
    )  # fmt: skip
    yield "kr8s: label", call(lambda api: existing(api).label(tier="front"))
    yield "kr8s: scale", call(lambda api: Deployment.get(name, namespace=NAMESPACE, api=api).scale(3))
    yield "kr8s: refresh a missing deployment (404)", call(lambda api: Deployment("nothere", NAMESPACE, api).refresh())
    yield "kr8s: create what exists (409)", call(lambda api: made(api).create())

    def watched(server: Server) -> list[str]:
        api = server.kr8s()
        stream = api.watch("pods", namespace=NAMESPACE, label_selector=labels)
        return _watch_while(
            server,
            ((kind, obj.name) for kind, obj in stream),
            make=lambda: Pod(pod("kr8s-watched", **labels), api=api).create(),
            delete=lambda: Pod("kr8s-watched", NAMESPACE, api).delete(force=True),
        )

    yield "kr8s: a watch of pods by label as one is made and deleted", watched
    # kr8s sends DeleteOptions as a body without kind or apiVersion (kubectl and the client send theirs with both).
    yield (
        "kr8s: delete the deployment, foreground",
        call(lambda api: existing(api).delete(propagation_policy="Foreground")),
    )


def _until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("a step's preparation never came true")
        time.sleep(0.2)


def _watch_while(
    server: Server, events: Iterator[tuple[str, str]], make: Callable[[], Any], delete: Callable[[], Any]
) -> list[str]:
    """A library's watch read in a thread while a pod is made and deleted: the events it yielded, in order. Neither
    library's watch ends of itself (lightkube's starts again when the server ends it; kr8s's takes no timeout), so the
    proxy cuts it once the deletion has been seen, and the step waits until the proxy has recorded it."""
    before = server.watches()
    seen: list[str] = []

    def read() -> None:
        for kind, name in events:
            seen.append(f"{kind} {name}")
            if kind == "DELETED":
                return

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    time.sleep(0.5)
    make()
    time.sleep(0.5)
    delete()
    thread.join(10)
    server.proxy.cut_watches()
    server.watch_recorded(before)
    return seen


# Comparing --------------------------------------------------------------------------------------------------------


def discovery(path: str) -> bool:
    bare = path.split("?", 1)[0].rstrip("/") or "/"  # kr8s asks for /version/, /api/ and /apis/
    if bare.startswith("/openapi/") or bare in ("/api", "/apis", "/version"):
        return True
    parts = bare.strip("/").split("/")
    return (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) in (2, 3))


FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "replicas"), ("metadata", "labels"), ("metadata", "annotations", "note")),
    "Scale": (("spec", "replicas"), ("status", "replicas")),
    "Node": (("spec", "taints"), ("spec", "unschedulable")),
    "Pod": (("spec", "nodeName"),),
    "NodePool": (("spec", "template", "spec", "nodeClassRef"),),
}


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _name(meta: dict[str, Any]) -> str:
    """A name, or for one the server generated (a ReplicaSet's pods), its prefix: the rest is random on both. A pod
    template's hash is each server's own (kube-controller-manager's FNV of the template, the lab's SHA-256)."""
    generated = meta.get("generateName")
    name = f"{generated}*" if generated else str(meta.get("name") or "")
    template = (meta.get("labels") or {}).get("pod-template-hash")
    return name.replace(f"-{template}-", "-<hash>-") if template else name


def shape(body: Any) -> Any:
    """What a client reads of an answer's body."""
    if not isinstance(body, dict):
        return body
    kind = body.get("kind") or ""
    if kind == "Status":
        details = body.get("details") or {}
        return {"kind": kind, "status": body.get("status"), "reason": body.get("reason"), "code": body.get("code"),
                "details": {k: details.get(k) for k in ("kind", "name", "group")}}  # fmt: skip
    if kind == "Table":
        return {"kind": kind, "columns": [c.get("name") for c in body.get("columnDefinitions") or []],
                "rows": len(body.get("rows") or [])}  # fmt: skip
    if kind.endswith("List") or "items" in body:
        names = sorted(_name(i.get("metadata") or {}) for i in body.get("items") or [])
        return {"kind": kind, "apiVersion": body.get("apiVersion"), "items": names,
                "continue": bool((body.get("metadata") or {}).get("continue"))}  # fmt: skip
    meta = body.get("metadata") or {}
    shaped: dict[str, Any] = {
        "kind": kind,
        "apiVersion": body.get("apiVersion"),
        "name": _name(meta),
        "namespace": meta.get("namespace"),
        "deleting": "deletionTimestamp" in meta,
        "finalizers": meta.get("finalizers") or [],
        "has": sorted(k for k in ("uid", "resourceVersion", "creationTimestamp", "generation") if k in meta),
    }
    for path in FIELDS.get(kind, ()):
        shaped[".".join(path)] = _get(body, path)
    return shaped


def decoded(exchange: Exchange) -> Any:
    text = exchange.answer.decode(errors="replace")
    if "watch=" in exchange.path and exchange.status == 200:
        events = []
        for line in text.splitlines():
            if line.strip():
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") != "BOOKMARK":
                    events.append(f"{event.get('type')} {_name(obj.get('metadata') or {}) or obj.get('code')}")
        # Status changes come as MODIFIED events in whatever number the server's controllers make: read only the
        # order of what appeared and went.
        return [e for e in events if not e.startswith("MODIFIED")]
    try:
        return shape(json.loads(text)) if text.strip() else ""
    except ValueError:
        return {"not JSON": exchange.content_type}


def request_of(exchange: Exchange) -> str:
    path = exchange.path.split("?", 1)[0]
    for prefix in ("/k8s/clusters/",):  # the lab serves each cluster under its own prefix
        if path.startswith(prefix):
            path = "/" + path.split("/", 4)[4]
    return f"{exchange.method} {path}"


@dataclass
class Run:
    """One server's exchanges, by step."""

    steps: dict[str, list[Exchange]] = field(default_factory=dict)


def run_corpus(server: Server) -> Run:
    done = Run()
    for label, step in [*kubectl_steps(), *client_steps(), *lightkube_steps(), *kr8s_steps(), *closing_steps()]:
        server.step_start = len(server.proxy.exchanges)
        step(server)
        time.sleep(0.2)  # the proxy records an exchange once it has passed the answer on
        done.steps[label] = [e for e in server.proxy.exchanges[server.step_start :] if not discovery(e.path)]
    return done


def differences(lab: Run, real: Run) -> list[tuple[str, str, str]]:
    """(step, what, detail) for every difference a client could see."""
    found = []
    for label, real_exchanges in real.steps.items():
        lab_exchanges = lab.steps.get(label, [])
        real_requests = [request_of(e) for e in real_exchanges]
        lab_requests = [request_of(e) for e in lab_exchanges]
        if real_requests != lab_requests:
            found.append((label, "requests", f"lab sent {lab_requests}, real sent {real_requests}"))
        for lab_e, real_e in zip(lab_exchanges, real_exchanges, strict=False):
            if request_of(lab_e) != request_of(real_e):
                continue
            what = request_of(real_e)
            if lab_e.status != real_e.status:
                found.append((label, f"{what} status", f"lab {lab_e.status}, real {real_e.status}"))
                continue
            if "protobuf" in real_e.content_type:
                continue  # kubectl also accepts JSON, which the lab answers; it never speaks protobuf (README)
            lab_shape, real_shape = decoded(lab_e), decoded(real_e)
            if lab_shape != real_shape:
                found.append((label, f"{what} answer", f"lab {lab_shape}, real {real_shape}"))
    return found


def compare(lab: Server, real: Server) -> list[tuple[str, str, str]]:
    return differences(run_corpus(lab), run_corpus(real))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", required=True, help="a kubeconfig of the real cluster (client certificate)")
    parser.add_argument("--lab", nargs=2, metavar=("URL", "TOKEN"), required=True, help="the lab cluster's API")
    options = parser.parse_args()
    from tests.kube.realcluster import RealCluster

    real = RealCluster(Path(options.real), None, None)
    folder = Path(tempfile.mkdtemp(prefix="apidiff-"))
    real_proxy = FaultProxy(real.server, ssl_context=real.ssl_context()).start()
    lab_proxy = FaultProxy(options.lab[0]).start()
    lab_proxy.headers["Authorization"] = f"Bearer {options.lab[1]}"
    try:
        for label, what, detail in compare(Server("lab", lab_proxy, folder), Server("real", real_proxy, folder)):
            reason = KNOWN.get((label, what))
            print(f"{'KNOWN' if reason else 'DIFF '} {label}: {what}: {detail}" + (f"  ({reason})" if reason else ""))
    finally:
        real_proxy.stop()
        lab_proxy.stop()


if __name__ == "__main__":
    main()
