"""The error of the command line: one a user can act on.

Every command turns the :class:`a0py.A0Error` it meets into a :class:`CliError`
(``a0py/cli/_common.py``: ``errors_about``, ``errors_about_topic``), so nothing reaches
the user as a traceback. It is defined in :mod:`a0py.clitypes`, beside the parameter
types, so that the commands living beside their package (the broker's) raise the same
one.
"""

from a0py.clitypes import CliError

__all__ = ["CliError"]
