"""crossbuild's tools inside other people's agent frameworks."""
