"""The provisioning simulation: which pods go to existing nodes, in-flight NodeClaims or new NodeClaims."""
