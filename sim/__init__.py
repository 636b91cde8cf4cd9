"""A deterministic simulator over the real library: see docs/sim.md.

Many logical clients run turnstile's real code under a seeded scheduler (:mod:`sim.scheduler`),
one at a time, against moto's DynamoDB driven in-process (:mod:`sim.ddb`); every DynamoDB call is
a scheduling point and a place for a fault, and time is virtual. The seed alone decides the
interleaving, the faults and so the history, which :mod:`sim.checks` judges.
"""
