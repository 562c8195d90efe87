"""Scoring models and baselines on hold-out scenes, and reporting the scores."""
