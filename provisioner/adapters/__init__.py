"""Adapters from the engine's ports to real systems; the only place allowed to import `kubernetes`."""
