"""`--cluster`: the driver of `execute` on a Ray cluster. Takes `CompareOptions` and a Ray address, takes an
inventory of each node's dump files, runs each rank's units on the node that holds them (`RayExecutor`), and
gives the same per-rank reports plus a cluster overview and page. Ray is imported lazily."""
