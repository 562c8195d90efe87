"""Synthetic scenes with exact 2 m truth, and synthetic water painted into real scenes."""
