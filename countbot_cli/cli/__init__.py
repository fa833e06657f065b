"""The command line (SPEC §1): the one layer that imports typer."""
