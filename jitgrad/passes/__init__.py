"""Graph-to-graph passes of the compiler (each a small pure function)."""
