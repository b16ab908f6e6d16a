"""The command line: main (the parser) over one module per command group, common
(store and config lookup, progress, errors) and reference (the command reference)."""
