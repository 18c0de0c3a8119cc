"""`manage.py karp`: kubectl for karpui's lab cluster. This file parses the command line and dispatches; each verb's
work is in karpui/cli/ (printing) over the services the Kubernetes API and the dashboard call too.

kubectl's verbs, writing through the same path as the Kubernetes API (karpui.writes.objects):
  apply -f FILE|DIR|- (three-way, as kubectl's), delete -f FILE | delete KIND NAME,
  get KIND[,KIND...] [NAME] [-n NS|-A] [-l SEL] [-o wide|json|yaml|name|jsonpath=...] [--no-headers],
  describe KIND NAME, scale deploy/NAME --replicas N, rollout restart deploy/NAME,
  label|annotate KIND NAME key=value key2- [--overwrite], taint node NAME key=value:Effect [--overwrite] | key:Effect-,
  cordon NODE, uncordon NODE, drain NODE [--ignore-daemonsets] [--force].
The lab: advance DURATION, logs [--since DURATION], reset, cluster create NAME [--mode lab|kwok|observe]
  [--kubeconfig FILE|in-cluster] [--context CTX] [--components all|cluster|none] (then --cluster NAME picks it; every
  verb refuses a cluster that does not exist; a lab with --components cluster runs only its cluster side, a plain
  cluster for another karpui in kwok mode), kubeconfig [CLUSTER ...] [--kind] [--as USER] [--server URL]
  [--certificate-authority FILE] (--kind: the contexts named kind-<cluster>, as kind names them), crds (the
  CustomResourceDefinitions
  a kwok cluster needs: karp crds | kubectl apply -f -).
Decisions, each made as a karpui user and audited: approve NAME|deny NAME --as USER [--reason TEXT] [--confirm],
  pause --as USER --for 2h --reason TEXT, resume --as USER, disrupt node NAME --as USER --reason TEXT (another
  person approves), savings (realised and forgone per NodePool), audit [--since DURATION] [-o json] (the cluster's
  own trail, newest first), approval-mode NODEPOOL MODE [--threshold $/h] --as USER
  --reason TEXT (from manual to auto or auto-below: a request an approver decides with approval-mode approve|deny ID).
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand

from karpui.cli import decisions, edits, lab, reads
from karpui.cli.common import KarpError, Run
from karpui.cli.jsonpath import JSONPathError
from karpui.clusters import registry
from karpui.insight import selectors
from karpui.people.audit import Actor
from karpui.writes.configs import Conflict
from provisioner.durations import DurationError
from provisioner.manifests import ManifestError
from provisioner.selectors import SelectorError

# Each verb on a cluster (--cluster, default the lab), in the order `karp` lists them.
VERBS: dict[str, Callable[[Run], None]] = {
    "apply": edits.apply,
    "delete": edits.delete,
    "get": reads.get,
    "describe": reads.describe,
    "scale": edits.scale,
    "taint": edits.taint,
    "label": edits.label,
    "annotate": edits.annotate,
    "cordon": edits.cordon,
    "uncordon": edits.uncordon,
    "drain": edits.drain,
    "rollout": edits.rollout,
    "advance": lab.advance,
    "logs": reads.logs,
    "reset": lab.reset,
    "approve": decisions.approve,
    "deny": decisions.deny,
    "pause": decisions.pause,
    "resume": decisions.resume,
    "disrupt": decisions.disrupt,
    "savings": reads.savings,
    "audit": reads.audit,
    "approval-mode": decisions.approval_mode,
    "kubeconfig": lab.kubeconfig,
}
# Verbs about no cluster of karpui's, or one not made yet.
CLUSTERLESS: dict[str, Callable[[list[str], dict[str, Any], Actor, Callable[[str], None]], None]] = {
    "crds": lab.crds,
    "cluster": lab.cluster,
}
OUTPUTS = ("wide", "json", "yaml", "name")


class Command(BaseCommand):
    help = __doc__

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--cluster", default=registry.DEFAULT_CLUSTER, help="cluster name (default: lab)")
        parser.add_argument("-n", "--namespace", default=None)
        parser.add_argument("-A", "--all-namespaces", action="store_true")
        parser.add_argument("-f", "--filename", action="append", default=[])
        parser.add_argument("-o", "--output", default="")
        parser.add_argument("--show-managed-fields", action="store_true", help="get -o yaml|json: keep managedFields")
        parser.add_argument("-l", "--selector", default="")
        parser.add_argument("--replicas", type=int, default=None)
        parser.add_argument("--overwrite", action="store_true")
        parser.add_argument("--ignore-daemonsets", action="store_true", help="drain: leave DaemonSet pods")
        parser.add_argument("--force", action="store_true", help="drain: evict pods no controller manages")
        parser.add_argument("--delete-emptydir-data", action="store_true", help="drain: accepted, as kubectl's")
        parser.add_argument("--since", default=None)
        parser.add_argument("--no-headers", action="store_true")
        parser.add_argument(
            "--as", dest="as_user", default=None, help="the karpui user deciding (approve, deny, pause)"
        )
        parser.add_argument("--reason", default="")
        parser.add_argument(
            "--confirm", action="store_true", help="approve: confirm a command past the eviction or savings threshold"
        )
        parser.add_argument("--for", dest="for_duration", default=None, help="pause duration, e.g. 2h")
        parser.add_argument("--threshold", type=float, default=None, help="approval-mode auto-below: $/h")
        parser.add_argument("--server", default=None, help="kubeconfig: karpui's URL (default http://127.0.0.1:8000)")
        parser.add_argument("--certificate-authority", default=None, help="kubeconfig: CA file of an HTTPS server")
        parser.add_argument(
            "--kind", action="store_true", help="kubeconfig: name each cluster's entries kind-<cluster>, as kind does"
        )
        parser.add_argument("--mode", default="lab", help="cluster create: lab (default), kwok or observe")
        parser.add_argument(
            "--kubeconfig", default=None, help="cluster create: how to reach a kwok or observe cluster (or in-cluster)"
        )
        parser.add_argument("--context", default=None, help="cluster create: the kubeconfig's context")
        parser.add_argument(
            "--components",
            default=None,
            help="cluster create, a lab: all (default: cluster side and karpui's controllers), cluster (the cluster "
            "side only: a plain cluster for kwok mode) or none (a bare API server)",
        )
        parser.add_argument("args", nargs="*")
        return parser

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._dispatch(list(args), options)
        except BrokenPipeError:
            sys.stderr.close()  # `karp logs | head`: the reader left; that is not an error
        except (PermissionDenied, ValidationError) as error:
            messages = getattr(error, "messages", None) or [str(error)]
            self.stderr.write(f"error: {'; '.join(messages)}")
            sys.exit(1)
        except (
            KarpError,
            ManifestError,
            LookupError,
            SelectorError,
            JSONPathError,
            DurationError,
            Conflict,  # a kwok cluster that did not take the write
        ) as error:
            message = str(error).strip("'\"") if isinstance(error, KeyError) else str(error)
            self.stderr.write(message if message.startswith(("error", "Error")) else f"error: {message}")
            sys.exit(1)

    def _dispatch(self, words: list[str], options: dict[str, Any]) -> None:
        if not words:
            raise KarpError(f"a verb is required: one of {', '.join([*VERBS, *CLUSTERLESS])}")
        verb, rest = words[0], words[1:]
        if verb not in VERBS and verb not in CLUSTERLESS:
            raise KarpError(f'unknown command "{verb}" for "karp"')
        output = options["output"]
        if output and output not in OUTPUTS and not output.startswith("jsonpath="):
            raise KarpError(
                f'unable to match a printer suitable for the output format "{output}", '
                f"allowed formats are: {','.join(OUTPUTS)},jsonpath"
            )
        # Each verb writes under its own field manager, as kubectl's do (kubectl-label, kubectl-client-side-apply).
        manager = "karp-client-side-apply" if verb == "apply" else f"karp-{verb}"
        actor = Actor(name=f"cli:{getpass.getuser()}", via="cli", manager=manager)
        if verb in CLUSTERLESS:
            CLUSTERLESS[verb](rest, options, actor, self.stdout.write)
            return
        try:
            cluster = selectors.cluster_get(name=options["cluster"])
        except LookupError as error:
            raise KarpError(
                f"{error}: clusters are made in the admin, or by the operator with `karp cluster create NAME`"
            ) from None
        VERBS[verb](Run(cluster, rest, options, actor, self.stdout.write, self.stderr.write))
