"""The functions' workers compile their code and the layer once: the bytecode goes to a cache
folder of its own (``local.workers.BYTECODE_CACHE``, under ``build/``), never into the asset or
the layer (whose content the CDK hashes; the layer's own bytecode stays as its build wrote it),
and a second start reads it instead of compiling the layer's sources again (boto3, botocore,
Powertools: most of a worker's start)."""

from __future__ import annotations

from pathlib import Path

from local import workers

HANDLER = "service.handlers.products.handler"


def compiled(folder: Path) -> dict[Path, int]:
    """Every bytecode file under ``folder``, with its modification time (ns)."""
    return {path: path.stat().st_mtime_ns for path in folder.rglob("*.pyc")}


def test_a_second_start_reuses_the_bytecode_of_the_first(assembly, template, tmp_path):
    cache = tmp_path / "pycache"
    directory = Path(assembly.directory)
    environment = {"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9"}  # never called here

    def start_and_stop() -> workers.Workers:
        started = workers.start(
            template, directory, environment, only={HANDLER}, bytecode_dir=cache
        )
        started.stop()
        return started

    # Given a first start with an empty cache
    function = next(f for f in workers.functions(template, directory) if f.handler == HANDLER)
    asset_before = compiled(function.asset)
    layer_before = compiled(workers.host_layer())
    (first,) = start_and_stop().values()
    after_first = compiled(cache)
    layer = first.layers[0]
    # Then the layer's modules and the function's own were compiled into the cache
    assert any("botocore" in path.parts for path in after_first), sorted(after_first)[:5]
    assert any("service" in path.parts for path in after_first)
    # And neither the layer nor the asset holds bytecode of this start
    assert layer == workers.host_layer() and compiled(layer) == layer_before
    assert compiled(function.asset) == asset_before

    # When the same functions start again
    start_and_stop()

    # Then nothing was compiled again: the same files, not one rewritten
    assert compiled(cache) == after_first
