"""The command-line layer: thin Click commands over the core library."""
