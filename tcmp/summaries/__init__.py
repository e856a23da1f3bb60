"""tcmp.summaries: the one definition of a tensor summary (numel, min, max, mean, L2 norm, NaN/inf counts, CRC-32 of
the canonical bytes), used by the daemon to index dump files and by the compare to summarize raw tensors alike, so
that both routes give the same numbers. `compiled` is the optional C extension (compiled.c): the summaries'
moment loops and tensor mode's one-pass pair loop."""
