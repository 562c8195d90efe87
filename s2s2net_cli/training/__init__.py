"""Training the network: chips cut from scenes and labels, their datasets, the loss, and the DeepSpeed run."""
