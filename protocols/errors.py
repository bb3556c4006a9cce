"""The one error type for mistakes in a user's input (scenario, trace, topology, profile)."""


class InputError(ValueError):
    """Bad input; the message names the file, line or key and what was expected."""
