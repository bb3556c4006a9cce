"""The emulation runtime: virtual time, mailboxes, costs, Ray broker hosts and results."""
import protocols  # noqa: F401  (first: it decides whether compiled modules or their sources are imported)
