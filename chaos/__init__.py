"""A Jepsen-style nemesis for turnstile: every pattern at once, under random faults, judged from
the recorded history and the final table state only.

* :mod:`chaos.history`: what every client did (invoke, then ok / fail / unknown with values).
* :mod:`chaos.nemesis`: the seeded fault schedule (DynamoDB call faults, stream faults, clock skew,
  paused lease holders, TTL deletions), each fault logged with its time and target.
* :mod:`chaos.workloads`: the concurrent clients, one kind per pattern, calling the real handlers
  in-process with API Gateway proxy events.
* :mod:`chaos.checkers` and :mod:`chaos.linear`: the judges.
* :mod:`chaos.runner`: wires it all to DynamoDB Local and prints the report.

Hand-written, because no maintained Python library runs a Jepsen-style test against in-process
handlers (Jepsen itself is Clojure and drives real nodes over SSH); the linearizability search is
the small Wing-Gong-Lowe search over one counter, which needs no general framework.
"""
