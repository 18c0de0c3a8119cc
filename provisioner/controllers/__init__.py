"""Reconcile loops (provisioning, NodeClaim lifecycle) written once against the cluster's object store."""
