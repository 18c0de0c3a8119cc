"""Karpenter's options read from its Deployment's environment, as its controller reads them from its own."""

from provisioner.options import KarpenterOptions, container_env, env_problem
from provisioner.sim import karpenter


def test_the_controller_deployments_environment_gives_the_options_and_a_bad_value_its_field():
    deployment = karpenter.deployment()
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "FEATURE_GATES", "value": "SpotToSpotConsolidation=true"})
    options = KarpenterOptions.from_env(container_env(deployment, karpenter.CONTAINER))
    assert options.gate("SpotToSpotConsolidation") is True
    assert options.ignore_dra_requests is False  # not set there: the default it is read over
    assert env_problem(deployment, karpenter.CONTAINER) is None

    env.append({"name": "IGNORE_DRA_REQUESTS", "value": "maybe"})
    assert env_problem(deployment, karpenter.CONTAINER) == (
        f"spec.template.spec.containers[0].env[{len(env) - 1}].value",
        'IGNORE_DRA_REQUESTS: invalid boolean value "maybe" for IGNORE_DRA_REQUESTS: parse error',
    )


def test_another_containers_environment_and_a_value_from_are_not_karpenters():
    deployment = karpenter.deployment()
    spec = deployment["spec"]["template"]["spec"]
    spec["containers"].append({"name": "sidecar", "image": "x", "env": [{"name": "IGNORE_DRA_REQUESTS", "value": "x"}]})
    spec["containers"][0]["env"].append({"name": "FEATURE_GATES", "valueFrom": {"configMapKeyRef": {"name": "g"}}})
    assert container_env(deployment, karpenter.CONTAINER) == {
        "BATCH_MAX_DURATION": "10s",
        "BATCH_IDLE_DURATION": "1s",
        "PREFERENCE_POLICY": "Respect",
        "MIN_VALUES_POLICY": "Strict",
    }
