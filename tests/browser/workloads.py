"""Manifests the browser tests apply: a NodePool of their own and a Deployment pinned to it, so tests sharing one
live server never provision for each other."""

from __future__ import annotations

from pathlib import Path


def pool_and_deployment(
    folder: Path,
    pool: str,
    deployment: str,
    *,
    replicas: int,
    requests: str,
    instance_type: str = "",
    cpu_limit: str = "",
) -> Path:
    """A file with the kwok node class, NodePool `pool` (on-demand, optionally one instance type and a CPU limit;
    empty nodes go after an hour, so a test's nodes stay put) and `replicas` pods of `deployment` on it."""
    types = f'\n        - {{key: node.kubernetes.io/instance-type, operator: In, values: ["{instance_type}"]}}'
    limits = f'\n  limits:\n    cpu: "{cpu_limit}"' if cpu_limit else ""
    text = f"""\
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {pool}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}}{types if instance_type else ""}{limits}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 1h
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {deployment}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {deployment}}}}}
  template:
    metadata: {{labels: {{app: {deployment}}}}}
    spec:
      nodeSelector: {{karpenter.sh/nodepool: {pool}}}
      containers:
        - {{name: app, image: pause, resources: {{requests: {requests}}}}}
"""
    path = folder / f"{pool}-{deployment}-{cpu_limit or 'unlimited'}.yaml"
    path.write_text(text)
    return path
