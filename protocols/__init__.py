"""The routing protocols: the broker, its tables and the protocol mixins (see stack.py)."""
from .compiled import use_sources_if_asked_or_stale

use_sources_if_asked_or_stale()
