"""The one error type for mistakes in a user's input (scenario, trace, topology, profile)."""
import difflib


class InputError(ValueError):
    """Bad input; the message names the file, line or key and what was expected."""


def unknown_key(key: str, known) -> str:
    """The message for a mistyped key: the likeliest meant one, and every one known."""
    known = sorted(known)
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{key}: unknown key ({hint}known: {', '.join(known)})"
