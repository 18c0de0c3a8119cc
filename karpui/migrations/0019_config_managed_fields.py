"""NodePools and node classes stored before karpui tracked managedFields from creation get them, as kube-apiserver
would have kept them: the last client-side apply's fields its applier's, the rest before-first-apply's. Without
this, the first `kubectl apply --server-side` of such a NodePool handed every field to kubectl and dropped the
approval mode and others' labels and annotations."""

import json
from datetime import UTC, datetime

from django.db import migrations

from provisioner.apimachinery import fieldmanager

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _last_applied(annotations):
    try:
        applied = json.loads(annotations.get(LAST_APPLIED) or "null")
    except ValueError:
        return None
    return applied if isinstance(applied, dict) else None


def track(apps, schema_editor):
    time = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for model, api_version, kind in (("NodePool", "karpenter.sh/v1", "NodePool"), ("NodeClass", None, None)):
        for row in apps.get_model("karpui", model).objects.all():
            if row.managed_fields:
                continue
            metadata = {"name": row.name}
            if row.labels:
                metadata["labels"] = dict(row.labels)
            if row.annotations:
                metadata["annotations"] = dict(row.annotations)
            live = {
                "apiVersion": api_version or row.api_version,
                "kind": kind or row.kind,
                "metadata": metadata,
                "spec": row.spec,
            }
            entries = fieldmanager.as_if_tracked(
                live,
                _last_applied(row.annotations or {}),
                applier="karp-client-side-apply",
                root_type=None,  # custom resources: every list atomic
                time=time,
            )
            row.managed_fields = [entry.to_json() for entry in entries]
            row.save(update_fields=["managed_fields"])


class Migration(migrations.Migration):
    dependencies = [("karpui", "0018_nodepool_karpenter_order")]

    operations = [migrations.RunPython(track, migrations.RunPython.noop)]
