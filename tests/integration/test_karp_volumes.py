"""StorageClasses, PersistentVolumes and PersistentVolumeClaims through `karp`, stored as kube-apiserver stores them,
and read by the engine: a pod's unbound claim puts its node in its class's zones, as Karpenter's volume topology does."""

import json

import pytest

from tests.karp import EXAMPLES, karp, ok, table

CLASS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions:
      - {key: topology.kubernetes.io/zone, values: [test-zone-a]}
"""
VOLUME = """
apiVersion: v1
kind: PersistentVolume
metadata: {name: static}
spec:
  capacity: {storage: 1024Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /data}
"""
CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: zonal
  resources: {requests: {storage: 1Gi}}
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: writer}
spec:
  replicas: 1
  selector: {matchLabels: {app: writer}}
  template:
    metadata: {labels: {app: writer}}
    spec:
      containers:
        - name: writer
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 1}}
          volumeMounts: [{name: data, mountPath: /data}]
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: data}
"""


def test_a_class_a_volume_and_a_claim_are_applied_defaulted_and_listed_as_kubectl_lists_them(lab):
    assert ok("apply", "-f", "-", stdin=CLASS) == "storageclass.storage.k8s.io/zonal created\n"
    assert ok("apply", "-f", "-", stdin=VOLUME) == "persistentvolume/static created\n"
    assert ok("apply", "-f", "-", stdin=CLAIM) == "persistentvolumeclaim/data created\n"
    assert ok("apply", "-f", "-", stdin=CLAIM) == "persistentvolumeclaim/data unchanged\n"
    [sc] = table("get", "sc")
    assert {k: v for k, v in sc.items() if k != "AGE"} == {
        "NAME": "zonal",
        "PROVISIONER": "ebs.csi.aws.com",
        "RECLAIMPOLICY": "Delete",
        "VOLUMEBINDINGMODE": "WaitForFirstConsumer",
        "ALLOWVOLUMEEXPANSION": "false",
    }
    ok("annotate", "sc", "zonal", "storageclass.kubernetes.io/is-default-class=true")
    assert [sc["NAME"] for sc in table("get", "sc")] == ["zonal (default)"]  # as kube-apiserver's printer names it
    [pv] = table("get", "pv")
    assert {k: v for k, v in pv.items() if k != "AGE"} == {
        "NAME": "static",
        "CAPACITY": "1Gi",  # stored canonical, as kube-apiserver stores 1024Mi
        "ACCESS MODES": "RWO",
        "RECLAIM POLICY": "Retain",
        "STATUS": "Pending",
        "CLAIM": "<none>",
        "STORAGECLASS": "manual",
        "VOLUMEATTRIBUTESCLASS": "<unset>",
        "REASON": "<none>",
    }
    [pvc] = table("get", "pvc", "-o", "wide")
    assert {k: v for k, v in pvc.items() if k != "AGE"} == {
        "NAME": "data",
        "STATUS": "Pending",  # no PV controller binds it: the engine reads it as unbound
        "VOLUME": "<none>",
        "CAPACITY": "<none>",
        "ACCESS MODES": "<none>",
        "STORAGECLASS": "zonal",
        "VOLUMEATTRIBUTESCLASS": "<unset>",
        "VOLUMEMODE": "Filesystem",
    }
    stored = json.loads(ok("get", "storageclass", "zonal", "-o", "json"))
    assert (stored["reclaimPolicy"], stored["volumeBindingMode"]) == ("Delete", "WaitForFirstConsumer")
    ok("delete", "pvc", "data")
    assert table("get", "persistentvolumeclaims") == []


def test_a_claim_without_a_class_gets_the_default_class_as_kube_apiserver_admits_it(lab):
    default = CLASS.replace(
        "metadata: {name: zonal}",
        "metadata: {name: standard, annotations: {storageclass.kubernetes.io/is-default-class: 'true'}}",
    )
    ok("apply", "-f", "-", stdin=default)
    ok("apply", "-f", "-", stdin=CLAIM.replace("  storageClassName: zonal\n", ""))
    assert table("get", "pvc")[0]["STORAGECLASS"] == "standard"


def test_a_bad_claim_and_a_bad_class_are_refused_naming_the_field(lab):
    code, _, err = karp("apply", "-f", "-", stdin=CLAIM.replace("  accessModes: [ReadWriteOnce]\n", ""))
    assert code == 1
    assert "spec.accessModes: Required value: at least 1 access mode is required" in err
    code, _, err = karp("apply", "-f", "-", stdin=CLASS.replace("WaitForFirstConsumer", "Later"))
    assert code == 1
    assert 'volumeBindingMode: Unsupported value: "Later"' in err
    code, _, err = karp("apply", "-f", "-", stdin=VOLUME.replace("  hostPath: {path: /data}\n", ""))
    assert code == 1
    assert "spec: Required value: must specify a volume type" in err
    assert table("get", "pvc") == table("get", "sc") == table("get", "pv") == []


# Without the claim the node lands in test-zone-c (the offering the kwok catalog ranks first for it).
@pytest.mark.parametrize("zone", ["test-zone-a", "test-zone-d"])
def test_a_pod_whose_claim_waits_for_its_node_gets_a_nodeclaim_in_the_class_zone(lab, zone):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("apply", "-f", "-", stdin=CLASS.replace("test-zone-a", zone) + "---" + CLAIM + "---" + DEPLOYMENT)
    ok("advance", "30s")
    [nodeclaim] = table("get", "nodeclaims")
    assert nodeclaim["ZONE"] == zone
    [pod] = [p for p in table("get", "pods", "-o", "wide") if p["NAME"].startswith("writer-")]
    assert pod["STATUS"] == "Running"


def test_a_pod_whose_claim_is_unbound_with_an_immediate_class_gets_no_node(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    immediate = CLASS.replace("volumeBindingMode: WaitForFirstConsumer\n", "")
    ok("apply", "-f", "-", stdin=immediate + "---" + CLAIM + "---" + DEPLOYMENT)
    ok("advance", "30s")
    assert table("get", "nodeclaims") == []
    [pod] = [p for p in table("get", "pods") if p["NAME"].startswith("writer-")]
    assert pod["STATUS"] == "Pending"
