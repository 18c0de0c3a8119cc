"""The human gate on disruption: approve, deny, pause, resume, ask for a node to go, cordon and uncordon."""
