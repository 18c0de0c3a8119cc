"""What people read about a cluster: capacity, pending verdicts, drill-down, grouping, devices, savings, what-if."""
