"""The package version, in a module of its own so every layer can read it without importing
the package's public surface (and so everything above it)."""

__version__ = "0.1.0"
