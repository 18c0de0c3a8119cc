"""The cluster port: the object API the controllers use, and the read helpers every implementation shares.

`api.ClusterAPI` is what a controller may do to a cluster (get, list, create, update, patch, delete, evict);
`memory.ObjectStore` implements it in memory (the lab's API server, and the cache a real cluster's adapter keeps);
`views`, `conditions`, `dra`, `pdb` and `events` read and write through it, the same for every implementation.
"""
