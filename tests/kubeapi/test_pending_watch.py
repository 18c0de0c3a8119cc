"""`kubectl get pods -w` while a worker ticks the lab, as with `./run.sh`: a scale-up's pods are seen Pending, then
Running, never born Running (the README's kubectl walk-through, and seed 000's first sample of 5 Pending pods)."""

from __future__ import annotations

import queue
import threading
import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from karpui.clusters import ticks
from karpui.kubeapi import watch


def lines_of(stream: Any) -> queue.Queue[str]:
    """A stream's lines as they come, read in a thread of their own."""
    seen: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            seen.put(line)

    threading.Thread(target=read, daemon=True).start()
    return seen


def test_a_watch_sees_a_ticked_scale_up_added_pending_then_modified_running(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    start = timezone.now()
    ticks.clusters_tick(now=start)  # a worker ticks the lab from now on: writes are stored, ticks react
    watches = watch.SLOTS.open
    watching = kubectl.popen("get", "pods", "-w", "--output-watch-events")
    try:
        seen = lines_of(watching.stdout)
        deadline = time.monotonic() + 60
        while watch.SLOTS.open == watches and time.monotonic() < deadline:  # listed, and now watching from there
            time.sleep(0.05)
        assert watch.SLOTS.open == watches + 1
        assert kubectl.ok("scale", "deployment", "inflate", "--replicas", "5") == "deployment.apps/inflate scaled\n"
        rows: list[list[str]] = []
        for second in (1, 2, 3):
            ticks.clusters_tick(now=start + timedelta(seconds=second))
        while sum(1 for row in rows if row[3] == "Running") < 5:
            rows.append(seen.get(timeout=60).split())
    finally:
        watching.terminate()
        watching.wait(timeout=10)
    header, *events = rows
    assert header == ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    first = {}
    for event in events:
        first.setdefault(event[1], event)
    assert len(first) == 5
    # Each pod is first seen added and Pending (unscheduled: no node yet), and last seen Running.
    assert {(e[0], e[2], e[3]) for e in first.values()} == {("ADDED", "0/1", "Pending")}
    last = {event[1]: event for event in events}
    assert {(e[0], e[2], e[3]) for e in last.values()} == {("MODIFIED", "1/1", "Running")}
