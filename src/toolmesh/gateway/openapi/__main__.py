"""``python -m toolmesh.gateway.openapi``: print the document (to regenerate
``docs/openapi.json``)."""

import sys

from toolmesh.gateway.openapi import render

sys.stdout.buffer.write(render().encode())  # UTF-8 whatever the locale
