"""The smaller hashed locks each install reads, cut from the one full lock.

``make lock`` resolves ``requirements-dev.txt`` (which includes ``requirements-local.txt``, which
includes ``requirements.txt``) into ``requirements.lock``: the one source of versions. From it,
this module writes, entry for entry (same version, same hashes):

* ``requirements-local.lock``: what ``requirements.txt`` and ``requirements-local.txt`` reach by
  the lock's ``# via`` annotations: the functions, synth and the local stack (``make local``).
* ``requirements-uv.lock``: the installer alone, which ``pip`` installs first (hashes required)
  so that every other install is ``uv pip`` with ``--require-hashes``.

The layer (``infra.layer``) is cut the same way, from ``requirements.txt`` alone.

    python -m infra.locks   # rewrites both from requirements.lock; prints which changed
"""

from __future__ import annotations

import argparse

from infra import layer

# Each derived lock: its closure's roots in the full lock (input files as "-r <file>", or names).
DERIVED = {
    "requirements-local.lock": ("-r requirements.txt", "-r requirements-local.txt"),
    "requirements-uv.lock": ("uv",),
}


def derive(name: str, full_lock: str) -> str:
    """The text of the derived lock ``name``, cut from the full lock's text."""
    pins = layer.closure(layer.parse_lock(full_lock), list(DERIVED[name]))
    roots = ", ".join(DERIVED[name])
    header = (
        "# Written by `make lock` (python -m infra.locks) from requirements.lock: its entries\n"
        f"# for {roots} and what they pull in, same versions, same hashes. Do not edit.\n"
    )
    return header + layer.layer_requirements(pins)


def write(full_lock: str | None = None) -> list[str]:
    """Rewrite every derived lock next to the full lock; return the names that changed."""
    text = layer.LOCK.read_text() if full_lock is None else full_lock
    changed = []
    for name in DERIVED:
        path = layer.ROOT / name
        content = derive(name, text)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    changed = write()
    for name in DERIVED:
        print(f"{name}: {'updated' if name in changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
