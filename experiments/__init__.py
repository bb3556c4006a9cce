"""Scenario files, their validation, the command line, and ready-made scenarios."""
