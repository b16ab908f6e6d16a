"""autopass: record a C/C++ build, tune whole-program stages and per-file flags, apply them."""

__version__ = "0.1.0"

# The package's rooms in the pipeline's order: each imports only from those before it
# (tests/test_layers.py), and docs/architecture.md is drawn from them (scripts/docs.py).
LAYERS = ("core", "capture", "store", "config", "measuring", "candidates", "evidence",
          "cluster", "tuning", "outputs", "cli")
