"""``python -m bnpjax.cli`` is the ``bnpjax`` command."""

import os

from bnpjax.cli import command

os.environ.setdefault("PYTHONUNBUFFERED", "1")
command()
