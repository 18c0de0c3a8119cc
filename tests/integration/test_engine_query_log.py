"""`manage.py engine` with DEBUG on keeps no growing log of its queries: each time round its loop it empties the
connection's query log, as Django does at each request (the mirror's writes of thousands of objects were kept)."""

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = pytest.mark.django_db


def test_each_time_round_its_loop_the_engine_empties_the_query_log(settings):
    settings.DEBUG = True
    connection.queries_log.append({"sql": "INSERT INTO karpui_kubeobject ... (a mirror's write)", "time": "0.001"})

    call_command("engine", "--once")  # no kwok or observe cluster: the loop reads the rows, then steps nothing

    assert list(connection.queries_log) == []
