"""Token-forcing validation of an engine against `ar` (scripts/validate.py): forcing.py holds
the comparison, cli.py the command line. Nothing here is imported by the runtime."""
