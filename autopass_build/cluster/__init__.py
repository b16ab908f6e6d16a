"""Tuning on a Ray cluster: the stage compositions and the search's candidates measured
on the target group's machines, several candidates at once.

    connect.py     the cluster the user named (never one found or started on our own)
    nodes.py       which nodes measure, grouped by CPU model, and the target group
    node_bench.py  on a measuring node: its baseline (moved to the stages chosen), the
                   A/A check, one evaluation
    dispatch.py    on the driver: a batch of candidates spread over the nodes, compiles
                   fanned out to any node, a lost node's candidate requeued

Only this package imports Ray, and only when a run names a cluster (`tune --cluster`
or [cluster].address): a local run never loads it.  docs/cluster.md says why it is
built this way and what trust a cluster needs.
"""
