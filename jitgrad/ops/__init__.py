"""Op definitions: each module registers its ops when imported (jitgrad/__init__ imports
them all, before anything runs an op; registry.py, which they share, imports none of them)."""
