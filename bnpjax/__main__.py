"""``python -m bnpjax`` is the ``bnpjax`` command."""

from bnpjax.cli import command

command()
