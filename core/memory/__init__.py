"""How the lab reads the caching allocator's state, wherever it comes from: segment maps and long series
drawn at a bounded number of points (shared by the allocator lab, training memory and imported snapshots)."""
