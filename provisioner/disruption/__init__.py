"""Karpenter's disruption: which nodes may go, by which method, and whether they are deleted or replaced."""
