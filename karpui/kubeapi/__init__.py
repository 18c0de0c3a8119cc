"""The Kubernetes REST API of each lab cluster, served by the Django app under /k8s/clusters/<cluster>/."""
