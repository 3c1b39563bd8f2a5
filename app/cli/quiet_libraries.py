"""What the model libraries print on their own: progress bars and advisories, turned off before they load."""

from __future__ import annotations

import os


def quiet_libraries(*, own_progress_bars: bool) -> None:
    """No progress bars or advisory warnings from the model libraries; the command's own lines stay.

    Set before the libraries are imported (they read these once). Without it every command that loads
    the model printed a "Loading weights" bar and transformers' advisories between its own lines.
    `own_progress_bars=False` (the server) also turns off every tqdm bar, ours included.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not own_progress_bars:
        os.environ.setdefault("TQDM_DISABLE", "1")
