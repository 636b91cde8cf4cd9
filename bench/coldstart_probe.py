"""One cold start, measured inside a fresh interpreter (run by ``bench.coldstart``; stdlib only).

    python -I -S -B bench/coldstart_probe.py <job.json> <result.json>

``job.json``: ``path`` (the as-deployed tree: the function's asset dir, the layer's ``python/``),
``module`` (a handler module, or ``"boto3"`` for the baseline: a bare ``import boto3`` and one
DynamoDB client) and ``event`` (the first request; none for the baseline). ``-I -S``: no user or
site packages, no script dir, no ``PYTHONPATH``: only the tree is importable. ``-B``: nothing
written next to the code (Lambda's ``/var/task`` and ``/opt`` are read-only), so a tree without
bytecode compiles every module at every cold start, as it would on Lambda.

The result: ``import_ms`` and ``first_request_ms`` (import plus the first request, wall, from the
first line of this script), ``cpu_ms`` (process time of the whole interpreter, start-up included)
and ``maxrss_kb`` (peak resident memory), and the first answer's status (so a broken request
is not timed as a fast one).
"""

import json
import sys
import time

START = time.perf_counter()


class Context:
    function_name = "coldstart"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:coldstart"
    aws_request_id = "coldstart"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def peak_rss_kb() -> int:
    """This interpreter's peak resident memory. ``VmHWM``, not ``ru_maxrss``: Linux carries the
    parent's high-water mark across fork and exec into ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    with open(sys.argv[1]) as source:
        job = json.loads(source.read())
    sys.path[:0] = job["path"]
    import importlib

    if job["module"] == "boto3":
        import boto3

        boto3.session.Session().client("dynamodb")
        imported = time.perf_counter()
        answered, status = imported, None
    else:
        handler = importlib.import_module(job["module"]).handler
        imported = time.perf_counter()
        answer = handler(job["event"], Context())
        answered = time.perf_counter()
        status = answer.get("statusCode") if isinstance(answer, dict) else None
        if status is None and isinstance(answer, dict):
            status = "failures={}".format(len(answer.get("batchItemFailures", [])))
    result = {
        "import_ms": (imported - START) * 1000,
        "first_request_ms": (answered - START) * 1000,
        "cpu_ms": time.process_time() * 1000,
        "maxrss_kb": peak_rss_kb(),
        "status": status,
        "modules": len(sys.modules),
        # which of the heavy optional imports this start paid for
        "loaded": sorted(m for m in job.get("watch", ()) if m in sys.modules),
    }
    with open(sys.argv[2], "w") as out:
        out.write(json.dumps(result))


main()
