"""The emulation runtime: virtual time, mailboxes, costs, Ray broker hosts and results."""
from protocols.compiled import use_sources_if_asked_or_stale

use_sources_if_asked_or_stale()
