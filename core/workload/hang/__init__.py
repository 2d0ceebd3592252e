"""A hung job's flight-recorder dumps: reading them (``dump``), which collective stopped the job and which rank
(``analysis``, ``findings``), and running a job with the recorder on (``recorder``)."""
