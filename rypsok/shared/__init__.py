"""What the configuration and the core both use, below both of them.

The vocabularies a configuration names, the secret wrapper, the driver types and their
traits, and the version. Nothing here imports another part of rypsok, so the direction of
the imports stays one way: mcp → core → config → shared (import-linter keeps it).
"""
