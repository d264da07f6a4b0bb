"""The conformance gate: its framework, its checks (each calls down into a layer) and its reports."""
