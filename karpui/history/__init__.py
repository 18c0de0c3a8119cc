"""What each cluster did over time: cost and trend samples recorded as it runs, read back as the charts' series."""
