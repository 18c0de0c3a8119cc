"""The lab cluster: a kwok-like simulated Kubernetes cluster that the controllers drive in virtual time."""
