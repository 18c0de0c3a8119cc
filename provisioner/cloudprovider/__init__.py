"""The cloud provider port (launch, get, delete, list a NodeClaim's instance) and its implementations."""
