"""Running a model over scenes: the model at run time, the tile stream, the mask writer, ranks
sharing a scene, many scenes, and the water-index baselines as forwards of their own."""
