"""karpui: the Django project and dashboard around the provisioner engine.

The Celery app (karpui.celery) is not imported here, as Celery's Django guide has it: the engine and the web
processes send no task but the lab's nudge (which imports it), and the import costs each of them 9 MiB of memory.
`celery -A karpui` finds it as karpui.celery.
"""
