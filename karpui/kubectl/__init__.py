"""kubectl for karpui's clusters: resource kinds, printers and the verbs behind `manage.py karp`."""
