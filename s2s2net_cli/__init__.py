"""s2s2net: rivers and lakes from Sentinel-2 at 2 m."""

__version__ = "0.1.0"
