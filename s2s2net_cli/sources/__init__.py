"""Where a scene comes from: stacks, Sentinel-2 products, STAC items, areas of interest."""
