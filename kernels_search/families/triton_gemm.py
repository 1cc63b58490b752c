"""Placeholder so the package imports; replaced below."""
