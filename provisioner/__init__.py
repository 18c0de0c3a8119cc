"""The karpui engine: Karpenter's provisioning and disruption logic as pure, deterministic Python."""
