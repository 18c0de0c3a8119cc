"""Kubernetes API machinery in pure Python: patches (JSON merge, JSON, strategic merge) and kubectl's apply."""
