"""The embedded explicit-state TLA+ model checker (TLC's semantics, pure Python)."""
