"""`python -m herd.editable` (run by `make setup`): an editable install of Herd that a folder
named `herd` cannot shadow.

A clone of Herd is a folder named `herd` (git names it after the repository). A script beside
it runs with that folder's parent first on sys.path, and Python's own path finder takes the
folder for a namespace package `herd` before setuptools' editable finder, which comes after it
in sys.meta_path, is asked: `import herd` succeeds and `herd.submit` fails with "module 'herd'
has no attribute 'submit'". A .pth file in site-packages moves the editable finder first; it
answers for Herd's own modules only. An installed wheel needs none of this: a regular package
always wins over a namespace folder.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

PTH = "herd-editable-first.pth"
LINE = ("import sys; [sys.meta_path.insert(0, sys.meta_path.pop(sys.meta_path.index(f))) for f in "
        "[f for f in sys.meta_path if getattr(f, '__module__', '').startswith('__editable___herd_')]]\n")
"""What the .pth runs as Python starts (a .pth line that begins with `import` is executed),
after the editable install's own .pth (they run in name order: `_` sorts before `h`)."""


def install(site_packages: Path | None = None) -> Path | None:
    """Write the .pth where this Python's packages go; None (nothing written) when Herd is not
    an editable install here."""
    site = Path(site_packages or sysconfig.get_paths()["purelib"])
    if not any(site.glob("__editable___herd_*finder.py")):
        return None
    path = site / PTH
    path.write_text(LINE)
    return path


if __name__ == "__main__":
    where = install()
    print(f"wrote {where}" if where else "herd is not an editable install here: nothing to do")
