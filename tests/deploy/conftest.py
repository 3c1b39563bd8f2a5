"""The chart's dependency charts, copied into charts/poimen-memory/charts/ before anything renders it.

Chart.yaml declares the CloudNativePG `cluster` chart and the `opensearch` chart; helm refuses to render a
chart whose dependencies are missing from charts/ (even disabled ones). That folder is git-ignored; the
packaged charts come from `../shared/helm-deps` beside the repository (CI) or $HELM_DEPS_DIR.
"""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "poimen-memory"
HELM_DEPS = Path(os.environ.get("HELM_DEPS_DIR", ROOT.parent / "shared" / "helm-deps"))
DEPENDENCY_PACKAGES = ("cluster-0.8.1.tgz", "opensearch-3.6.0.tgz")


def replace_if_different(source: Path, target: Path) -> None:
    """Put a copy of `source` at `target` by a rename, and only when the content differs.

    Test workers run in parallel (pytest -n): another one may be rendering the chart with helm meanwhile,
    and an in-place copy would hand it a truncated archive. Helm skips dot-named files in charts/.
    """
    if target.exists() and filecmp.cmp(source, target, shallow=False):
        return
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.copyfile(source, partial)
    partial.replace(target)


def copy_chart_dependencies() -> list[str]:
    """Copy the packaged dependency charts into the chart's charts/ folder; return those still missing."""
    target = CHART / "charts"
    target.mkdir(exist_ok=True)
    missing = []
    for package in DEPENDENCY_PACKAGES:
        source = HELM_DEPS / package
        if source.exists():
            replace_if_different(source, target / package)
        elif not (target / package).exists():
            missing.append(package)
    return missing


@pytest.fixture(scope="session", autouse=True)
def chart_dependencies() -> list[str]:
    """Runs once per session; helm calls then fail with 'missing in charts/ directory' if any is missing."""
    return copy_chart_dependencies()
