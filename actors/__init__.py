"""The emulation runtime: virtual time, mailboxes, costs, Ray broker hosts and results."""
