"""A profiler trace: the file's events (``file``), the GPU's timeline (``timeline``), the host's gaps, the operators
and their rates, the collectives, one trace's whole analysis (``analysis``), two traces compared (``diff``) and
the ranks of one job (``ranks``)."""
