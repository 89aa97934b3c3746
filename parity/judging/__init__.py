"""Judging the rows: roofline and peaks, spread and drift, ratios with intervals, the summary, per-layer attribution."""
