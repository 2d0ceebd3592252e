"""How the lab reads and drives the caching allocator, wherever it comes from: segment maps and long series
drawn at a bounded number of points (shared by the allocator lab, training memory and imported snapshots),
the allocator lab's step language and interpreter (``steps``) and ``PYTORCH_CUDA_ALLOC_CONF`` (``alloc_conf``)."""
