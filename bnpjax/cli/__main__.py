"""``python -m bnpjax.cli`` is the ``bnpjax`` command."""

import os

from bnpjax.cli import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
raise SystemExit(main())
