"""The dashboard: its views, their context and refusals, the login throttle, template tags, and /metrics."""
