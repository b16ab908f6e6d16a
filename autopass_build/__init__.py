"""autopass: record a C/C++ build, tune whole-program stages and per-file flags, apply them."""

__version__ = "0.1.0"
