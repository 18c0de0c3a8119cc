"""Long lists folded into rows people can scan: events (a Node and its NodeClaim share one row; the same event on
many objects is one row per reason), and the pods a disruption command would evict, by owner."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from django.db import connections
from django.db.models import Case, CharField, F, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform, compile_json_path
from django.db.models.functions import Cast, Coalesce, NullIf

from karpui import models
from karpui.insight.drilldown import object_url
from karpui.insight.owners import Owner, pod_owners
from karpui.kinds.resources import BY_KIND

NAMES_SHOWN = 10
EVENT_GROUPINGS = {"reason": "reason", "object": "object", "none": "none (every event)"}


def _fold_id(key: Any) -> str:
    """An id stable across refreshes, so a fold a person opened stays open (static/karpui/folds.js)."""
    return "fold-" + hashlib.sha1(repr(key).encode(), usedforsecurity=False).hexdigest()[:12]


def _url(cluster: models.Cluster, kind: str, namespace: str, name: str) -> str:
    return object_url(cluster, kind, namespace, name) if kind in BY_KIND else ""


def with_urls(cluster: models.Cluster, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a page shows (event_rows'), each shown object given its page's URL."""
    for row in rows:
        for shown in row["objects"]:
            shown["url"] = _url(cluster, *shown.pop("target"))
    return rows


class JsonText(KeyTextTransform):
    """A JSON path's value as text, SQL NULL when missing or null (as PostgreSQL's ->> gives it). On SQLite one
    JSON_EXTRACT: Django's KT reads each path twice there, to tell true, false and null apart, which no text field
    of an Event needs, and the Events page reads nine paths of every event."""

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, params, key_transforms = self.preprocess_lhs(compiler, connection)
        return f"JSON_EXTRACT({lhs}, %s)", (*params, compile_json_path(key_transforms))


def _text(path: str) -> Coalesce:
    return Coalesce(JsonText.from_lookup(path), Value(""), output_field=CharField())


def _events_sql(cluster: models.Cluster, events: QuerySet[models.KubeObject], subjects: bool) -> tuple[str, list[Any]]:
    """One row per event, with the JSON paths a row needs read once as columns (missing ones as "", a count as 1),
    its object's label and its event_key (its uid, or its row's id when it has none); with `subjects`, the subject it
    is shown under by object too. A Node's and its NodeClaim's events share their node (the NodeClaim's
    status.nodeName, or its own name until it has one); any other object is its own subject. The SQL around it is
    the same on SQLite and PostgreSQL: only the JSON reads, which Django writes for each, differ."""
    read = events.order_by().annotate(
        object_kind=_text("body__involvedObject__kind"),
        object_namespace=_text("body__involvedObject__namespace"),
        object_name=_text("body__involvedObject__name"),
    )
    subject: tuple[str, ...] = ()
    if subjects:
        # A NodeClaim's node, looked up through the unique index for each NodeClaim's event: a join let
        # PostgreSQL, before it had statistics of the table, scan every NodeClaim for every event (2.9 s).
        node = models.KubeObject.objects.filter(
            cluster=cluster, kind="NodeClaim", namespace="", name=OuterRef("object_name")
        ).values(node=JsonText.from_lookup("body__status__nodeName"))
        read = read.annotate(
            subject_name=Case(
                When(
                    object_kind="NodeClaim",
                    then=Coalesce(NullIf(Subquery(node.order_by()[:1]), Value("")), F("object_name")),
                ),
                default=F("object_name"),
                output_field=CharField(),
            )
        )
        subject = ("subject_name",)
    sql, params = read.values(
        "id",
        "name",
        "uid",
        "object_kind",
        "object_namespace",
        "object_name",
        *subject,
        event_type=_text("body__type"),
        event_reason=_text("body__reason"),
        event_message=_text("body__message"),
        event_count=Coalesce(NullIf(Cast(JsonText.from_lookup("body__count"), IntegerField()), 0), 1),
        event_first=NullIf(_text("body__firstTimestamp"), Value("")),  # what MIN skips: none seen is ""
        event_last=_text("body__lastTimestamp"),
    ).query.sql_with_params()
    columns = """read.*,
    object_kind || '/' || CASE WHEN object_namespace = '' THEN '' ELSE object_namespace || '/' END || object_name
      AS label,
    CASE WHEN uid = '' THEN '#' || CAST(id AS VARCHAR(20)) ELSE uid END AS event_key"""
    if subjects:
        # "Node" is the subject kind of both node kinds and of no other, so three columns name a subject.
        columns += """,
    CASE WHEN object_kind IN ('Node', 'NodeClaim') THEN 'Node' ELSE object_kind END AS subject_kind,
    CASE WHEN object_kind IN ('Node', 'NodeClaim') THEN '' ELSE object_namespace END AS subject_namespace"""
    return f"SELECT {columns} FROM ({sql}) read", [*params]  # noqa: S608 (Django's SQL, its params)


def _nodes_of(cluster: models.Cluster, claims: set[str]) -> dict[str, str]:
    """The node of each named NodeClaim that has one: one query, none when no NodeClaim is named."""
    if not claims:
        return {}
    found = models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim", namespace="", name__in=claims)
    return {
        name: node for name, node in found.values_list("name", JsonText.from_lookup("body__status__nodeName")) if node
    }


# The columns an event row is keyed by: the reason and type; the subject, reason and message; or the event.
EVENT_KEYS = {
    "reason": ("event_reason", "event_type"),
    "object": ("subject_kind", "subject_namespace", "subject_name", "event_reason", "event_message"),
    "none": ("event_key",),
}


def _row_id(by: str, key: tuple[str, ...]) -> str:
    """The fold ids rows had when they were grouped in Python, so a fold a person opened stays open."""
    if by == "object":
        kind, namespace, name, reason, message = key
        subject = ("node", name) if kind == "Node" else (kind, namespace, name)
        return _fold_id((*subject, reason, message))
    if by == "none":
        return _fold_id(("event", key[0]))
    return _fold_id(key)


def event_rows(
    cluster: models.Cluster,
    events: QuerySet[models.KubeObject],
    by: str = "object",
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`limit` rows of `events` from `offset` (all with `limit` None, each then with `all_objects`), newest first,
    ties by the Event's name, and the totals: how many events, the newest time among them ("" with none) and how
    many rows they make. By object: one row per subject, reason and message, so a NodeClaim's event counts as its
    Node's, with the counts summed and both objects named. By reason: one row per reason and type, its objects
    folded. By none: one row per event. A row shows its newest event's type, message and time, the earliest first
    time, the counts summed, and its objects by label (the first NAMES_SHOWN, and how many).

    One query, grouped, ranked and paged in the database, so what comes back is the page's rows and their shown
    objects whatever the cluster's size (and one more for the nodes of the NodeClaims shown, if any)."""
    e, params = _events_sql(cluster, events, by == "object")
    key = EVENT_KEYS[by]
    keys = ", ".join(key)
    columns = list(dict.fromkeys([*key, "event_type", "event_reason", "event_message", "event_last", "name"]))
    # Python orders text by code point, as SQLite does; PostgreSQL only under "C" (en_US puts "a-b" after "ab").
    bytewise = ' COLLATE "C"' if connections[events.db].vendor == "postgresql" else ""
    page, names = "", ""
    if limit is not None:
        page, names = " LIMIT %s OFFSET %s", " AND named.place <= %s"
        params += [limit, offset, NAMES_SHOWN]
    # A row is its newest event's (one window over each row's events, sorted once); the key is the last tie-break,
    # for two rows whose newest events tie on both. Only the shown rows' objects are gathered: their distinct
    # labels, numbered in order and counted. The totals come on every line, and on a line of their own when the
    # page is past the last. Only this module's column names are formatted into the SQL; values go as parameters.
    sql = f"""WITH e AS ({e}),
ranked AS (
  SELECT {", ".join(columns)},
    ROW_NUMBER() OVER w AS newest,
    SUM(event_count) OVER w AS total_count,
    COUNT(*) OVER w AS total_events,
    MIN(event_first) OVER w AS first_seen
  FROM e
  WINDOW w AS (PARTITION BY {keys} ORDER BY event_last DESC, name, id
    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)),
made AS (SELECT * FROM ranked WHERE newest = 1),
shown AS (SELECT * FROM made ORDER BY event_last DESC, name, {keys}{page}),
labels AS (
  SELECT {keys}, label, MIN(object_kind) AS object_kind, MIN(object_namespace) AS object_namespace,
    MIN(object_name) AS object_name
  FROM e WHERE ({keys}) IN (SELECT {keys} FROM shown)
  GROUP BY {keys}, label),
named AS (
  SELECT labels.*, ROW_NUMBER() OVER w AS place, COUNT(*) OVER w AS objects
  FROM labels
  WINDOW w AS (PARTITION BY {keys} ORDER BY label{bytewise} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)),
listed AS (
  SELECT {", ".join(f"shown.{c}" for c in columns)}, total_count, total_events, first_seen,
    label, object_kind, object_namespace, object_name, objects, place
  FROM shown JOIN named ON {" AND ".join(f"named.{c} = shown.{c}" for c in key)}{names}),
totals AS (
  SELECT (SELECT COUNT(*) FROM e) AS events, (SELECT MAX(event_last) FROM e) AS newest,
    (SELECT COUNT(*) FROM made) AS rows_made)
SELECT totals.*, listed.* FROM totals LEFT JOIN listed ON 1 = 1
ORDER BY listed.event_last DESC, {", ".join(f"listed.{c}" for c in ("name", *key))}, listed.place"""  # noqa: S608
    with connections[events.db].cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    count, newest, made = found[0][:3]
    totals = {"events": count, "since": newest or "", "rows": made}
    lines = [line[3:] for line in found if line[3] is not None]
    width = len(columns)
    nodes = _nodes_of(cluster, {line[width + 6] for line in lines if line[width + 4] == "NodeClaim"})
    rows: list[dict[str, Any]] = []
    for line in lines:
        row = dict(zip(columns, line, strict=False))
        total_count, total_events, first, label, kind, namespace, name, objects, _ = line[width:]
        row_key = tuple(row[c] for c in key)
        if not rows or rows[-1]["key"] != row_key:
            rows.append(
                {
                    "key": row_key,
                    "id": _row_id(by, row_key),
                    "type": row["event_type"],
                    "reason": row["event_reason"],
                    "message": row["event_message"],
                    "last": row["event_last"],
                    "first": first or "",
                    "count": int(total_count),
                    "events": int(total_events),
                    "objects": [],
                    "more": max(int(objects) - NAMES_SHOWN, 0),
                    "total_objects": int(objects),
                }
            )
        # A Node's and its NodeClaim's events lead to the node's page, which shows both; the URL itself is made
        # only for a row a page shows (with_urls).
        if kind in ("Node", "NodeClaim"):
            target = ("Node", "", nodes.get(name, name) if kind == "NodeClaim" else name)
        else:
            target = (kind, namespace, name)
        rows[-1]["objects"].append({"label": label, "target": target})
    for row in rows:
        del row["key"]
        if limit is None:
            row["all_objects"] = row["objects"]
            row["objects"] = row["objects"][:NAMES_SHOWN]
    return rows, totals


def evictions(cluster: models.Cluster, commands: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per command name, the pods it would evict grouped by owner (most pods first), each with its count and
    the first names folded; two queries for all commands."""
    wanted = {
        command["metadata"]["name"]: [p for c in command["spec"]["candidates"] for p in c.get("pods") or []]
        for command in commands
    }
    keys = {tuple(p.split("/", 1)) for pods in wanted.values() for p in pods if "/" in p}
    # With no pods, "" matches none and the query still runs: the page's query count does not depend on its data.
    refs = {
        (ns, name): owners
        for ns, name, owners in models.KubeObject.objects.filter(
            cluster=cluster,
            kind="Pod",
            namespace__in={k[0] for k in keys} or {""},
            name__in={k[1] for k in keys} or {""},
        ).values_list("namespace", "name", KeyTransform("ownerReferences", KeyTransform("metadata", "body")))
    }
    found = sorted(k for k in keys if k in refs)
    owner_of = dict(zip(found, pod_owners(cluster, ((ns, refs[ns, name]) for ns, name in found)), strict=True))
    grouped = {}
    for command, pods in wanted.items():
        members: dict[Owner | None, list[str]] = {}
        for pod in pods:
            members.setdefault(owner_of.get(tuple(pod.split("/", 1))), []).append(pod)  # type: ignore[arg-type]
        grouped[command] = sorted(
            (
                {
                    "id": _fold_id((command, owner)),
                    "label": owner.label if owner else "pods no longer there",
                    "url": _url(cluster, owner.kind, owner.namespace, owner.name) if owner else "",
                    "count": len(names),
                    "names": names[:NAMES_SHOWN],
                    "more": max(len(names) - NAMES_SHOWN, 0),
                }
                for owner, names in members.items()
            ),
            key=lambda g: (-g["count"], g["label"]),
        )
    return grouped
