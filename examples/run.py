"""``make examples``: every example, run from the INSTALLED wheel in a fresh virtualenv.

1. Build the wheel from pyproject.toml (hatchling, without build isolation: the pinned hatchling
   is in the dev venv, so no download).
2. Make a fresh venv under ``.examples/`` and install the wheel with its ``async`` extra, plus
   boto3/botocore/aiobotocore at the versions the dev venv has (the lock): nothing from the source
   tree is importable there.
3. Start DynamoDB Local (``local.dynamodb_local``), run each ``examples/*.py`` with that venv's
   Python, and end with ``examples: N passed, M failed`` (exit status 1 if any failed).

The CDK example needs aws-cdk-lib (430 MB): rather than install it again, a ``.pth`` file in a
second venv puts the dev venv's site-packages *after* the examples venv's, so turnstile and boto3
still come from the wheel and only aws_cdk/constructs/jsii come from the dev venv.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WORK = ROOT / ".examples"
PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")
CDK_EXAMPLES = {"cdk_app.py"}


def _run(command: list[str]) -> None:
    """Run quietly; on failure show what the command said."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")


def build_wheel(out: Path) -> Path:
    """Build the library's wheel into ``out`` and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("turnstile_ddb-*.whl"):
        old.unlink()
    build = ["-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)]
    _run([sys.executable, *build])
    (wheel,) = out.glob("turnstile_ddb-*.whl")
    return wheel


def fresh_venv(path: Path, wheel: Path, *, with_async: bool = False) -> Path:
    """A new venv at ``path`` with ``wheel`` and the locked SDK; returns its python.

    ``with_async`` adds the ``async`` extra (aiobotocore, for the asyncio examples).
    """
    shutil.rmtree(path, ignore_errors=True)
    _run([sys.executable, "-m", "venv", str(path)])
    python = path / "bin" / "python"
    pinned = ("boto3", "botocore", "aiobotocore") if with_async else ("boto3", "botocore")
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in pinned]
    target = f"{wheel}[async]" if with_async else str(wheel)
    _run([str(python), *PIP, target, *pins])
    return python


def site_packages(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def cdk_venv(path: Path, examples_python: Path) -> Path:
    """A venv without packages of its own: the examples venv first, then the dev venv (aws_cdk)."""
    shutil.rmtree(path, ignore_errors=True)
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    own = Path(site_packages(python))
    dev = sysconfig.get_paths()["purelib"]
    (own / "borrowed.pth").write_text(f"{site_packages(examples_python)}\n{dev}\n")
    return python


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from local.dynamodb_local import DynamoDBLocal

    wheel = build_wheel(WORK / "dist")
    python = fresh_venv(WORK / "venv", wheel, with_async=True)
    cdk_python = cdk_venv(WORK / "venv-cdk", python)
    scripts = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
    scripts = [p for p in scripts if p.name not in {"run.py", "__init__.py"}]
    with DynamoDBLocal() as db:
        env = {**os.environ, **db.environment(), "CDK_OUTDIR": str(WORK / "cdk.out")}
        env.pop("PYTHONPATH", None)

        def run(script: Path) -> tuple[Path, subprocess.CompletedProcess[str], float]:
            runner = cdk_python if script.name in CDK_EXAMPLES else python
            started = time.monotonic()
            result = subprocess.run(
                [str(runner), str(script)],
                cwd=WORK,  # not the repo: only the installed wheel is importable
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            return script, result, time.monotonic() - started

        # The CDK example (a jsii process) takes longest: start it first, the others beside it.
        ordered = sorted(scripts, key=lambda p: p.name not in CDK_EXAMPLES)
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = sorted(pool.map(run, ordered), key=lambda r: r[0].name)
    passed = failed = 0
    for script, result, seconds in results:
        if result.returncode == 0:
            passed += 1
            last = (result.stdout.strip().splitlines() or [""])[-1]
            print(f"ok   {script.name} ({seconds:.1f} s): {last}")
        else:
            failed += 1
            print(f"FAIL {script.name} ({seconds:.1f} s)\n{result.stdout}{result.stderr}")
    print(f"examples: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
