"""Benchmarks against DynamoDB Local, reported as ratios to a raw-write ceiling measured in the
same run (``make bench``)."""
