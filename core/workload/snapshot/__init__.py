"""A CUDA memory snapshot: reading the file (``reader``), what held memory (``analysis``), the full-resolution
side kept beside the store (``detail``), and recording one of your own training (``recorder``)."""
