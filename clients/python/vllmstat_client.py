"""vllmstat's Python client under its first import name: the same module as ``vllmstat.client``.

``import vllmstat_client`` and ``from vllmstat_client import Client`` keep working; new code
may write ``from vllmstat import Client``. This module replaces itself with ``vllmstat.client``
in ``sys.modules``, so that both names are one module (one set of module globals).
"""

import sys

from vllmstat import client as _client

sys.modules[__name__] = _client
