"""The write path: every change to a cluster's objects, for `karp`, the Kubernetes API, the dashboard and the admin."""
