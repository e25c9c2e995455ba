"""The one version string (pyproject.toml, the package and synth read it here)."""
__version__ = "0.2.0"
