"""Default topology spread constraints: the selector each pod gets, deduced as kube-scheduler deduces it.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/provisioning/scheduling/defaultconstraints_test.go
(Describe("DefaultTopologySpreadInjector")). Upstream reads the selector back from the constraint Inject stamps on the
pod; karpui's constraints hold a parsed selector, so each test reads the deduced metav1.LabelSelector from the
injector (the same one Inject parses) and checks the injected pods separately.
"""

import pytest

from provisioner import labels as wk
from provisioner.cluster.memory import ObjectStore
from provisioner.options import KarpenterOptions, OptionsError
from provisioner.pods import DO_NOT_SCHEDULE, HONOR, SCHEDULE_ANYWAY, OwnerReference, TopologySpreadConstraint
from provisioner.scheduling.defaultspread import DefaultSpreadInjector
from provisioner.selectors import LabelSelector
from tests.builders import pod
from tests.lab_builders import deployment, lab, nodepool_doc, reconfigure

# A default constraint carries no selector: one is deduced per pod.
ZONE_DEFAULT = TopologySpreadConstraint(1, wk.ZONE, DO_NOT_SCHEDULE, None)


def _store(*objects):
    store = ObjectStore(clock=lambda: 0.0)
    for obj in objects:
        store.create(obj)
    return store


def _meta(name, namespace="default", uid=None):
    return {"name": name, "namespace": namespace, "uid": uid or f"{name}-uid"}


def replica_set(name="rs", match_labels=None, expressions=None):
    selector = {"matchLabels": match_labels or {}}
    if expressions is not None:
        selector = {"matchExpressions": expressions}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": _meta(name), "spec": {"selector": selector}}


def stateful_set(name="ss", match_labels=None):
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(name),
        "spec": {"selector": {"matchLabels": match_labels or {}}},
    }


def replication_controller(name="rc", selector=None):
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": _meta(name),
        "spec": {"selector": selector},
    }


def service(name, selector, namespace="default"):
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, namespace), "spec": spec}


def controller_ref(api_version, kind, name, controller=True):
    return OwnerReference(kind, name, f"{name}-uid", controller, api_version)


def owned_pod(labels, owner=None, namespace="default"):
    return pod(labels=labels, owner=owner, namespace=namespace)


def inject(store, target, defaults=(ZONE_DEFAULT,)):
    """The selector deduced for the pod, or None if Inject leaves it without constraints; with one, Inject stamps
    the default with exactly that selector."""
    injector = DefaultSpreadInjector(store)
    [injected] = injector.inject([target], list(defaults))
    if not injected.spread:
        return None
    [constraint] = injected.spread
    assert constraint.topology_key == wk.ZONE
    selector = injector.selector(target)
    assert constraint.selector == LabelSelector.from_spec(selector)
    return selector


def _in(key, *values):
    return {"key": key, "operator": "In", "values": list(values)}


RS_WEB = replica_set(match_labels={"app": "web", "pod-template-hash": "abc123"})
RS_REF = controller_ref("apps/v1", "ReplicaSet", "rs")


# Context("owner selectors") ------------------------------------------------------------------------------------------


def test_should_deduce_a_replica_sets_selector_not_the_pods_labels():
    """It("should deduce a ReplicaSet's selector, not the pod's labels"): "extra" stays out, pod-template-hash in."""
    selected = owned_pod({"app": "web", "pod-template-hash": "abc123", "extra": "ignored"}, RS_REF)
    assert inject(_store(RS_WEB), selected) == {
        "matchExpressions": [_in("app", "web"), _in("pod-template-hash", "abc123")]
    }


def test_should_deduce_a_stateful_sets_selector_and_ignore_the_pods_volatile_labels():
    """It("should deduce a StatefulSet's selector and ignore the pod's volatile labels")"""
    labels = {
        "app": "db",
        "controller-revision-hash": "db-6f8c",
        "statefulset.kubernetes.io/pod-name": "db-0",
        "apps.kubernetes.io/pod-index": "0",
    }
    selected = owned_pod(labels, controller_ref("apps/v1", "StatefulSet", "ss"))
    assert inject(_store(stateful_set(match_labels={"app": "db"})), selected) == {
        "matchExpressions": [_in("app", "db")]
    }


def test_should_carry_a_replica_sets_match_expressions_through_verbatim():
    """It("should carry a ReplicaSet's matchExpressions through verbatim")"""
    not_other = {"key": "app", "operator": "NotIn", "values": ["other"]}
    selected = owned_pod({"app": "web"}, RS_REF)
    assert inject(_store(replica_set(expressions=[not_other])), selected) == {"matchExpressions": [not_other]}


def test_should_deduce_a_replication_controllers_selector():
    """It("should deduce a ReplicationController's selector"): merged into the labels, not ANDed on."""
    selected = owned_pod({"app": "legacy"}, controller_ref("v1", "ReplicationController", "rc"))
    assert inject(_store(replication_controller(selector={"app": "legacy"})), selected) == {
        "matchLabels": {"app": "legacy"}
    }


def test_should_not_deduce_a_selector_from_an_unsupported_owner_kind():
    """It("should not deduce a selector from an unsupported owner kind"): a Job's pod only via a Service."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("test-job"), "spec": {}}
    batch = owned_pod({"app": "batch"}, controller_ref("batch/v1", "Job", "test-job"))
    assert inject(_store(job), batch) is None


def test_should_ignore_a_non_controller_owner_reference():
    """It("should ignore a non-controller owner reference")"""
    selected = owned_pod({"app": "web"}, controller_ref("apps/v1", "ReplicaSet", "rs", controller=False))
    assert inject(_store(replica_set(match_labels={"app": "web"})), selected) is None


def test_should_tolerate_an_owner_that_no_longer_exists():
    """It("should tolerate an owner that no longer exists"): no owner, no Service, no constraint."""
    orphan = owned_pod({"app": "web"}, controller_ref("apps/v1", "ReplicaSet", "does-not-exist"))
    assert inject(_store(), orphan) is None


# Context("service selectors") ----------------------------------------------------------------------------------------


def test_should_deduce_a_selector_from_a_matching_service():
    """It("should deduce a selector from a matching service"): equality only, so matchLabels."""
    selected = owned_pod({"app": "web", "extra": "ignored"})
    assert inject(_store(service("web", {"app": "web"})), selected) == {"matchLabels": {"app": "web"}}


def test_should_merge_the_selectors_of_every_matching_service():
    """It("should merge the selectors of every matching service")"""
    store = _store(service("web", {"app": "web"}), service("frontend", {"tier": "frontend"}))
    selected = owned_pod({"app": "web", "tier": "frontend"})
    assert inject(store, selected) == {"matchLabels": {"app": "web", "tier": "frontend"}}


def test_should_not_deduce_a_selector_from_a_non_matching_service():
    """It("should not deduce a selector from a non-matching service")"""
    assert inject(_store(service("other", {"app": "other"})), owned_pod({"app": "web"})) is None


def test_should_skip_a_service_with_a_nil_selector():
    """It("should skip a service with a nil selector"): it selects nothing, not everything."""
    assert inject(_store(service("headless", None)), owned_pod({"app": "web"})) is None


def test_should_contribute_nothing_for_a_service_with_an_empty_selector():
    """It("should contribute nothing for a service with an empty selector"): it selects every pod, adds no label."""
    assert inject(_store(service("everything", {})), owned_pod({"app": "web"})) is None


def test_should_ignore_a_matching_service_in_another_namespace():
    """It("should ignore a matching service in another namespace")"""
    store = _store({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    store.create(service("web", {"app": "web"}, namespace="other"))
    assert inject(store, owned_pod({"app": "web"})) is None


def test_should_combine_a_service_selector_with_the_owners():
    """It("should combine a service selector with the owner's"): the Service's labels, the owner's expressions."""
    store = _store(RS_WEB, service("frontend", {"tier": "frontend"}))
    selected = owned_pod({"app": "web", "pod-template-hash": "abc123", "tier": "frontend"}, RS_REF)
    assert inject(store, selected) == {
        "matchLabels": {"tier": "frontend"},
        "matchExpressions": [_in("app", "web"), _in("pod-template-hash", "abc123")],
    }


# Context("conflicting service and owner selectors") ------------------------------------------------------------------


def test_should_let_a_replication_controllers_selector_overwrite_a_conflicting_service_label():
    """It("should let a ReplicationController's selector overwrite a conflicting service label")"""
    store = _store(replication_controller(selector={"app": "legacy"}), service("web", {"app": "web"}))
    selected = owned_pod({"app": "web"}, controller_ref("v1", "ReplicationController", "rc"))
    assert inject(store, selected) == {"matchLabels": {"app": "legacy"}}


def test_should_and_a_replica_sets_conflicting_selector_selecting_nothing():
    """It("should AND a ReplicaSet's conflicting selector, selecting nothing")"""
    store = _store(replica_set(match_labels={"app": "other"}), service("web", {"app": "web"}))
    selected = owned_pod({"app": "web"}, RS_REF)
    selector = inject(store, selected)
    assert selector == {"matchLabels": {"app": "web"}, "matchExpressions": [_in("app", "other")]}
    compiled = LabelSelector.from_spec(selector)
    assert (compiled.matches({"app": "web"}), compiled.matches({"app": "other"})) == (False, False)


# Context("selector caching") -----------------------------------------------------------------------------------------


def test_should_not_share_a_selector_between_pods_of_the_same_owner_with_different_labels():
    """It("should not share a selector between pods of the same owner with different labels"): one pass."""
    store = _store(replica_set(match_labels={"app": "web"}), service("frontend", {"tier": "frontend"}))
    frontend = owned_pod({"app": "web", "tier": "frontend"}, RS_REF)
    plain = owned_pod({"app": "web"}, RS_REF)
    injector = DefaultSpreadInjector(store)
    injected = injector.inject([frontend, plain], [ZONE_DEFAULT])
    assert injector.selector(frontend) == {"matchLabels": {"tier": "frontend"}, "matchExpressions": [_in("app", "web")]}
    assert injector.selector(plain) == {"matchExpressions": [_in("app", "web")]}
    assert [p.spread[0].selector.matches({"app": "web"}) for p in injected] == [False, True]


def test_should_not_share_a_selector_between_identically_labeled_pods_in_different_namespaces():
    """It("should not share a selector between identically-labeled pods in different namespaces")"""
    store = _store(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}, service("web", {"app": "web"})
    )
    selected, other = owned_pod({"app": "web"}), owned_pod({"app": "web"}, namespace="other")
    injected = DefaultSpreadInjector(store).inject([selected, other], [ZONE_DEFAULT])
    assert [len(p.spread) for p in injected] == [1, 0]


# Context("injection") ------------------------------------------------------------------------------------------------


def test_should_leave_a_pod_that_declares_its_own_constraints_untouched():
    """It("should leave a pod that declares its own constraints untouched")"""
    own = (TopologySpreadConstraint(5, wk.HOSTNAME, SCHEDULE_ANYWAY, LabelSelector.parse("app=web")),)
    declared = pod(labels={"app": "web"}, owner=RS_REF, spread=own)
    [injected] = DefaultSpreadInjector(_store(replica_set(match_labels={"app": "web"}))).inject(
        [declared], [ZONE_DEFAULT]
    )
    assert injected.spread == own


def test_should_be_a_no_op_when_no_defaults_are_configured():
    """It("should be a no-op when no defaults are configured")"""
    selected = owned_pod({"app": "web"}, RS_REF)
    assert inject(_store(replica_set(match_labels={"app": "web"})), selected, defaults=()) is None


def test_should_give_each_pod_its_own_constraints():
    """It("should give each pod its own constraint slice so relaxation can't leak across pods"): karpui's pods and
    constraints are immutable, so relaxing one pod's is replacing its own; each carries the default's skew."""
    pods = [owned_pod({"app": "web"}, RS_REF), owned_pod({"app": "web"}, RS_REF)]
    injected = DefaultSpreadInjector(_store(replica_set(match_labels={"app": "web"}))).inject(pods, [ZONE_DEFAULT])
    assert [len(p.spread) for p in injected] == [1, 1]
    assert [p.spread[0].max_skew for p in injected] == [1, 1]
    assert [p.spread for p in pods] == [(), ()]  # the pods given are left as they were


def test_should_preserve_the_configured_constraint_fields_on_the_injected_copy():
    """It("should preserve the configured constraint fields on the injected copy")"""
    configured = TopologySpreadConstraint(4, wk.ZONE, SCHEDULE_ANYWAY, None, min_domains=3, node_taints_policy=HONOR)
    selected = owned_pod({"app": "web"}, RS_REF)
    [injected] = DefaultSpreadInjector(_store(replica_set(match_labels={"app": "web"}))).inject(
        [selected], [configured]
    )
    [constraint] = injected.spread
    assert (constraint.max_skew, constraint.when_unsatisfiable, constraint.min_domains) == (4, SCHEDULE_ANYWAY, 3)
    assert constraint.node_taints_policy == HONOR
    assert constraint.selector == LabelSelector.from_spec({"matchExpressions": [_in("app", "web")]})


def test_should_deduce_independent_selectors_for_pods_of_different_workloads_in_one_pass():
    """It("should deduce independent selectors for pods of different workloads in one pass")"""
    store = _store(replica_set("web-rs", {"app": "web"}), replica_set("api-rs", {"app": "api"}))
    web = owned_pod({"app": "web"}, controller_ref("apps/v1", "ReplicaSet", "web-rs"))
    api = owned_pod({"app": "api"}, controller_ref("apps/v1", "ReplicaSet", "api-rs"))
    undefaulted = owned_pod({"app": "orphan"})
    injector = DefaultSpreadInjector(store)
    injected = injector.inject([web, api, undefaulted], [ZONE_DEFAULT])
    assert injector.selector(web) == {"matchExpressions": [_in("app", "web")]}
    assert injector.selector(api) == {"matchExpressions": [_in("app", "api")]}
    assert [len(p.spread) for p in injected] == [1, 1, 0]


# The option and provisioning (options.go:358, provisioner.go:336) --------------------------------------------------

SPREAD_BY_ZONE = """
podTopologySpread:
  defaultConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
"""


def _zones_of_nodeclaims(options):
    made = lab(nodepool_doc(), deployment(replicas=3, cpu="100m"), options=options)
    made.advance(60)
    claims = made.store.list("NodeClaim")
    return sorted(c["metadata"]["labels"][wk.ZONE] for c in claims)


def test_scheduler_config_default_constraints_spread_a_deployment_over_the_zones():
    """SCHEDULER_CONFIG's podTopologySpread.defaultConstraints: a Deployment's three small pods, which share one node
    without it, are spread one per zone, counted by their ReplicaSet's selector."""
    assert len(_zones_of_nodeclaims(KarpenterOptions())) == 1
    zones = _zones_of_nodeclaims(KarpenterOptions.from_env({"SCHEDULER_CONFIG": SPREAD_BY_ZONE}))
    assert len(zones) == 3
    assert len(set(zones)) == 3


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ("{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}", "[0].maxSkew must be greater than 0"),
        ("{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}", "[0].topologyKey must be set"),
        (
            "{maxSkew: 1, topologyKey: z, whenUnsatisfiable: Never}",
            '[0].whenUnsatisfiable "Never" must be one of "DoNotSchedule" or "ScheduleAnyway"',
        ),
        (
            "{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}",
            "[0].labelSelector must not be set, as selectors are deduced for each pod",
        ),
        (
            "{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}",
            "[0].matchLabelKeys must not be set, as it has no effect on default constraints",
        ),
        (
            "{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: z, "
            "whenUnsatisfiable: DoNotSchedule}",
            "[1] is a duplicate of [0], {z, DoNotSchedule}",
        ),
    ],
)
def test_scheduler_config_refuses_what_kube_scheduler_refuses(constraint, message):
    """options.go:374 Validate, as kube-scheduler's ValidatePodTopologySpreadArgs."""
    with pytest.raises(OptionsError) as error:
        KarpenterOptions.from_env({"SCHEDULER_CONFIG": f"podTopologySpread: {{defaultConstraints: [{constraint}]}}"})
    assert str(error.value) == (
        f"parsing scheduler config, validating scheduler config, podTopologySpread.defaultConstraints{message}"
    )


def test_scheduler_config_refuses_unknown_fields_and_allows_none():
    """ParseSchedulerConfiguration: decoded strictly; empty means no defaults."""
    with pytest.raises(OptionsError) as error:
        KarpenterOptions.from_env({"SCHEDULER_CONFIG": "podTopologySpread: {defaults: []}"})
    assert str(error.value) == (
        "parsing scheduler config, decoding scheduler config, error unmarshaling JSON: while decoding JSON: json: "
        'unknown field "defaults"'
    )
    assert KarpenterOptions.from_env({"SCHEDULER_CONFIG": ""}).default_spread == ()


@pytest.mark.parametrize(("kept", "nodes"), [(True, 3), (False, 1)], ids=["defaults kept", "defaults dropped"])
def test_consolidation_simulates_the_pods_with_the_default_spread(kept, nodes):
    """SimulateScheduling's NewScheduler injects the defaults as provisioning's does: three pods spread one per zone
    stay so while the defaults hold; dropped, consolidation packs them onto one node."""
    spread = KarpenterOptions.from_env({"SCHEDULER_CONFIG": SPREAD_BY_ZONE})
    made = lab(nodepool_doc(), deployment(replicas=3, cpu="100m"), options=spread)
    made.advance(60)
    launched = sorted(c["metadata"]["name"] for c in made.store.list("NodeClaim"))
    assert len(launched) == 3
    reconfigure(made, nodepool_doc(), options=spread if kept else KarpenterOptions())
    made.advance(600)
    remaining = sorted(c["metadata"]["name"] for c in made.store.list("NodeClaim"))
    assert len(remaining) == nodes
    assert set(remaining) <= set(launched)  # none replaced: no pod moved to a node launched for it
