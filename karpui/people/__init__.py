"""Who acts and what they may do: the actor every write is audited as, the audit trail, roles, API tokens."""
