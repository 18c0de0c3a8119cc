"""Each cluster karpui runs: lab runs and warm engines, real clusters' engines, leases, and the rows it lives in."""
